// Small helpers shared by the schedule tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "common/error.hpp"

namespace trident::testing {

// The message of the InputError that `call` throws; a test failure (and "") when it throws none.
template <class Call>
std::string input_error_message(Call&& call) {
  try {
    std::forward<Call>(call)();
  } catch (const InputError& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected an InputError";
  return "";
}

}  // namespace trident::testing
