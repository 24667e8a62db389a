#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include "gtest_exit_code.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  Kokkos::ScopeGuard kokkos(argc, argv);
  const bool failed = RUN_ALL_TESTS() != 0;
  return trident::testing::gtest_exit_code(failed, trident::testing::all_tests_skipped());
}
