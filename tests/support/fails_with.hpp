// Whether a call throws flashgen::Error with this code and a message holding
// `needle`: the check of every test of a refusal or a broken rule.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "flashgen/flashgen.hpp"

namespace flashgen::testing {

::testing::AssertionResult fails_with(ErrorCode code, const std::string& needle,
                                      const auto& call) {
  try {
    call();
  } catch (const Error& error) {
    if (error.code() == code && std::string(error.what()).find(needle) != std::string::npos)
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "code " << static_cast<int>(error.code()) << ": "
                                         << error.what();
  }
  return ::testing::AssertionFailure() << "no error";
}

}  // namespace flashgen::testing
