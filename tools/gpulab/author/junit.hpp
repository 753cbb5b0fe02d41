/// @file junit.hpp
/// @brief The test results CTest writes with --output-junit: what selftest reads instead of
/// CTest's console lines.
#pragma once

#include <string>
#include <vector>

namespace gpulab::cli {

/// One <testcase> of a JUnit file.
struct JunitCase {
  std::string name;
  std::string status;  ///< "run" (passed), "fail", "notrun" (skipped or not run), ... as CTest says
  bool failed = false;   ///< a <failure> element
  bool skipped = false;  ///< a <skipped> element, or status notrun/disabled
  bool passed() const { return !failed && !skipped && status == "run"; }
};

/// Every <testcase> of @p xml, in order; throws std::runtime_error when there is none and the
/// text is not a JUnit file.
std::vector<JunitCase> parse_junit(const std::string& xml);

}  // namespace gpulab::cli
