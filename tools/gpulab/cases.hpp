/// @file cases.hpp
/// @brief Running one test case of a lab executable in its own process (or under mpirun on W
/// ranks) with a time limit, and judging what it left behind: its records and its exit.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab_config.hpp"
#include "process.hpp"
#include "scorecard.hpp"

namespace gpulab::cli {

/// What one run of a case left: the process, its records (every rank's), launcher findings.
struct CaseRun {
  ProcessResult process;
  std::vector<nlohmann::json> records;
  std::string skip_reason;            ///< "no NVIDIA driver ..." when the test main skipped [gpu] cases
  std::vector<std::string> problems;  ///< launcher findings: a killed rank, an abort, leftovers
};

/// How to run a case.
struct RunSpec {
  std::string exe;
  std::string case_name;
  int ranks = 0;                  ///< > 0: under mpirun with this many ranks
  double timeout_s = 120.0;
  std::uint64_t seed = 0;
  fs::path log_dir;               ///< logs and the case's report file go here
  std::string stem;               ///< file name stem for this run's logs ("case-3")
  std::map<std::string, std::string> env;  ///< added to the environment (e.g. GPULAB_SMALL)
};

/// Runs it; writes <stem>.log (all output) and reads <stem>.jsonl (records) in the log folder.
CaseRun run_case(const RunSpec& spec);

/// The verdict on a correctness case from a run: pass, fail (with the failures' own words and
/// the lab's hints for a hang or a crash), or not run (needs a GPU).
Check judge_case(const CaseInfo& c, const CaseRun& run, const LabConfig& lab, double timeout_s);

/// Catch2's own words for failures (assertion text, exception message) in a test's output.
std::vector<std::string> catch_failures(const std::string& output);

/// A failed stretch case is shown as such ("OPT") and not counted; a passed one says so.
void mark_stretch(const CaseInfo& c, Check& check);

/// Whether the test executable @p exe (the reference: the grader's own) can use a CUDA device:
/// "" when it can, else the reason ("no NVIDIA driver ...").
std::string device_missing(const std::string& exe);

}  // namespace gpulab::cli
