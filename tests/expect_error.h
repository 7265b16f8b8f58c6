// f() must throw posenc::Error whose message contains `part` (the value and what was expected).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "posenc/error.h"

namespace posenc {

inline void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing '" << part << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

}  // namespace posenc
