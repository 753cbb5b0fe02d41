/// @file cases.hpp
/// @brief Running one test case of a lab executable in its own process (or under mpirun on W
/// ranks) with a time limit, and judging what it left behind: its records and its exit.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/lab_config.hpp"
#include "base/process.hpp"
#include "grade/scorecard.hpp"

namespace gpulab::cli {

/// Where the code under test runs: under gpulab-launch (tools/gpulab/launch/README.md), whose
/// frames carry its records, and inside bubblewrap where it can.
struct Confinement {
  fs::path launcher;               ///< gpulab-launch
  std::optional<Sandbox> sandbox;  ///< none: not sandboxed, and `not_sandboxed` says why
  std::string not_sandboxed;
  bool seccomp = true;             ///< the launcher's seccomp filter (off with --no-sandbox)
  std::string no_seccomp;          ///< why there is none ("" when there is)
  long memory_mb = 0;              ///< each test process's resident memory, at most (GPULAB_LIMIT_MEMORY_MB); 0: no limit

  /// For the scorecard's JSON: {"sandboxed", "seccomp", "not_sandboxed", "no_seccomp"}.
  nlohmann::json to_json() const;
  /// The scorecard's line when either is missing ("" when both are there).
  std::string missing() const;
};

/// What one run of a case left: the process, its records (every rank's), launcher findings.
struct CaseRun {
  ProcessResult process;
  std::string token;                  ///< the GPULAB_RUN_TOKEN this run was given
  int ranks = 0;                      ///< > 0: ran under mpirun on this many ranks
  std::vector<nlohmann::json> records;
  std::string skip_reason;            ///< "no NVIDIA driver ..." when the test main skipped [gpu] cases
  std::vector<std::string> problems;  ///< launcher findings: a killed rank, an abort, leftovers, a refused execve
  std::vector<std::string> notes;     ///< what did not happen and fails nothing ("fault not injected: the run ended …")
  std::string seccomp_note;           ///< why the launcher had no seccomp filter ("" when it had)
};

/// How to run a case.
/// A case's output (both streams, every rank) past which it is stopped: more than any test writes.
constexpr std::size_t kMaxCaseOutput = std::size_t{256} << 20;

struct RunSpec {
  std::string exe;
  std::string case_name;
  int ranks = 0;                  ///< > 0: under mpirun with this many ranks
  double timeout_s = 120.0;
  std::uint64_t seed = 0;
  fs::path log_dir;               ///< logs and the case's report file go here
  std::string stem;               ///< file name stem for this run's logs ("case-3")
  std::map<std::string, std::string> env;  ///< added to the environment (e.g. GPULAB_SMALL)
  const Confinement* confine = nullptr;    ///< nullptr: the program runs as it is, its records in <stem>.jsonl
  /// Under a confinement, the values the case's checks compared come back (GPULAB_OUTPUTS): "got"
  /// those under test (a submission), "all" those and what they were compared with (the
  /// reference), "" none. They land in <stem>-outputs/ and are listed in the output records.
  std::string outputs;
};

/// Runs it; writes <stem>.log (all output, each frame shortened to its size). Under a confinement,
/// the records are the launcher's frames (one per process, from the output stream); otherwise
/// they are read from <stem>.jsonl in the log folder.
CaseRun run_case(const RunSpec& spec);

/// What a verdict is measured against, besides the run itself.
struct JudgeContext {
  double timeout_s = 120.0;         ///< the limit the run had
  std::string gpu_missing;          ///< the grader's own device probe: "" when a GPU is there
  long reference_assertions = -1;   ///< the reference's assertions on this case (all ranks); -1: unknown
};

/// What the completion records of a run say (see tests/support/catch_runner.hpp).
struct Completion {
  int records = 0;               ///< completion records for the case with the run's token, all ranks
  int duplicates = 0;            ///< ranks with more than one
  long passed = 0, failed = 0;   ///< assertions, summed over ranks
  bool skipped = false;          ///< every rank skipped it (no device)
  int skipped_records = 0;       ///< records that say the case was skipped, on any rank
  std::string skip_reason;
};
Completion read_completion(const CaseRun& run, const std::string& case_name);

/// The verdict on a correctness case from a run: pass only with a completion record on every rank
/// and no failure; otherwise fail with the failures' own words and the lab's hints for a hang or
/// a crash ("ended before its checks finished" when the record is missing, "exit 77 is reserved"
/// when 77 does not mean a [gpu] case on a machine the grader found without a GPU, "ran 3 of the
/// reference's 560 checks" when a pass made fewer assertions than the reference, "says it skipped
/// the case" when a skip's record comes with an exit other than 77); or not run.
Check judge_case(const CaseInfo& c, const CaseRun& run, const LabConfig& lab, const JudgeContext& context);

/// Catch2's own words for failures (assertion text, exception message) in a test's output.
std::vector<std::string> catch_failures(const std::string& output);

/// A failed stretch case is shown as such ("OPT") and not counted; a passed one says so.
void mark_stretch(const CaseInfo& c, Check& check);

/// Whether the test executable @p exe (the reference: the grader's own) can use a CUDA device:
/// "" when it can, else the reason ("no NVIDIA driver ...").
std::string device_missing(const std::string& exe);

}  // namespace gpulab::cli
