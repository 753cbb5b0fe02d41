/// @file grade.hpp
/// @brief `gpulab grade NN`: build the chosen sources, run every test case in its own process
/// with a time limit, alternate learner and reference for performance, print a scorecard.
///
/// With --sanitize the [gpu] cases run again, with GPULAB_SMALL=1 (tests shrink their problems),
/// under compute-sanitizer's memcheck, racecheck, synccheck and initcheck; a finding fails that
/// tool's check with the tool's first report. (Guard bands sit inside the allocation, so an
/// out-of-bounds *read* into them is invisible to memcheck; writes are caught by the bands.)
///
/// Exit codes: 0 every check ran and passed; 1 something failed (including a build that does not
/// compile, a crash, a hang, a forbidden library call); 2 nothing failed but some checks could not
/// run here (no GPU, not enough memory).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "labs.hpp"

namespace gpulab::cli {

struct GradeOptions {
  std::string lab;                 ///< "01", "1" or "01-hello-kernel"
  std::string submission;          ///< a folder with the lab's file names; "" = labs/NN-slug
  bool solutions = false;          ///< grade the reference (instructor)
  std::string json_path;           ///< write the scorecard as JSON here
  std::optional<std::uint64_t> seed;
  int rounds = 3;                  ///< performance: at least this many learner/reference alternations
  int max_rounds = 10;             ///< and at most this many (more while noisy or near the threshold)
  double perf_time_cap_s = 120.0;  ///< per performance check
  bool quiet = false;              ///< print only failures and the result line
  double timeout_s = 0;            ///< per test case; 0 = the lab's own limit
  std::vector<std::string> cases;  ///< run only these test cases (exact names); empty = all
  std::vector<int> ranks;          ///< distributed labs: these widths W; empty = the lab's list
  bool sanitize = false;           ///< also run the [gpu] cases, made small, under compute-sanitizer
};

/// One line of the scorecard.
struct Check {
  std::string name;
  std::string kind;     ///< build, structure, correctness, performance
  std::string where;    ///< cpu, gpu or "" (build steps)
  std::string status;   ///< pass, fail, not-run
  double seconds = 0.0;
  std::vector<std::string> details;
  std::vector<std::string> hints;
  nlohmann::json data = nlohmann::json::object();
};

struct GradeResult {
  int exit_code = 1;
  std::string lab;
  std::string sources;
  std::uint64_t seed = 0;
  std::vector<Check> checks;
  std::string not_run_reason;
  nlohmann::json to_json() const;
};

GradeResult grade(const Paths& paths, const GradeOptions& options);

}  // namespace gpulab::cli
