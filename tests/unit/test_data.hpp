// Recorded samples for the unit tests (tests/unit/data, see its README).
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "test_paths.hpp"

// The whole text of tests/unit/data/<name>; "" when it does not exist.
inline std::string data(const char* name) {
  std::ifstream in(std::string(RXV_TEST_DATA) + "/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
