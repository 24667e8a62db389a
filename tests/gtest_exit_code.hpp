// The exit code of a GoogleTest binary under CTest: 1 when a test failed, 77 (the tests'
// SKIP_RETURN_CODE) when every test that ran was skipped, else 0. A skip is reported by exit
// code rather than by matching output, so it can never hide a failure in the same binary.
#pragma once

#include <gtest/gtest.h>

namespace trident::testing {

inline constexpr int kSkipExitCode = 77;

// Whether this process ran tests and skipped every one of them.
inline bool all_tests_skipped() {
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  return unit.test_to_run_count() > 0 && unit.skipped_test_count() == unit.test_to_run_count();
}

inline int gtest_exit_code(bool failed, bool all_skipped) {
  if (failed) return 1;
  return all_skipped ? kSkipExitCode : 0;
}

}  // namespace trident::testing
