/// @file scorecard.hpp
/// @brief The scorecard: one Check per line, what kind it is, how it ended, and the one place that
/// counts them, decides the exit code, prints them (colour only on a terminal) and writes JSON.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpulab::cli {

/// How a check ended.
enum class Status {
  kPass,       ///< ran and passed
  kFail,       ///< ran and failed (or could not be built, crashed, hung)
  kNotRun,     ///< could not run on this machine (no GPU, not enough memory): never a pass
  kInfo,       ///< explains, never judges (kernel resources)
  kStretch,    ///< a stretch goal not reached: shown, not counted
  kEmuPass,    ///< a [gpu] case passed on the CPU emulator: its GPU check is still to run
  kEmuFail,    ///< a [gpu] case failed on the CPU emulator: a logic error, a failure anywhere
  kEmuNotRun,  ///< a [gpu] case the emulator cannot run (a construct it does not support)
};

/// What a check is about.
enum class Kind { kBuild, kStructure, kDiagnosis, kCorrectness, kSanitizer, kProfile, kPerformance, kIntegrity };

/// Where a check ran: host code, the GPU, or neither (a build step).
enum class Where { kNone, kCpu, kGpu };

const char* to_string(Status status);  ///< "pass", "fail", "not-run", "info", "stretch", "emu-pass", ...
const char* to_string(Kind kind);      ///< "build", "structure", ...
const char* to_string(Where where);    ///< "", "cpu", "gpu"
Where where_from_string(const std::string& where);  ///< "cpu" / "gpu" / anything else → kNone

/// One line of the scorecard.
struct Check {
  std::string name;
  Kind kind = Kind::kCorrectness;
  Where where = Where::kNone;
  Status status = Status::kFail;
  double seconds = 0.0;
  std::vector<std::string> details;
  std::vector<std::string> hints;
  nlohmann::json data = nlohmann::json::object();

  /// A failing check with one detail line and an optional hint.
  static Check failure(const std::string& name, Kind kind, const std::string& detail, const std::string& hint = "");
};

/// The counts a verdict is made of.
struct Counts {
  int passed = 0, failed = 0, not_run = 0, stretch = 0;
  int emulated_ok = 0, emulated_not_run = 0;  ///< emulated passes count as not run (on the GPU)
};

/// The lines of one grade, counted once, printed as they come.
class Scorecard {
 public:
  /// @p quiet: print only failures and performance figures (selftest's plants).
  explicit Scorecard(bool quiet = false, std::ostream* out = nullptr);

  /// Also print, under each check, every fact its case checked that held, with its figures
  /// (`grade --verbose`): the numbers a lesson's predict-then-measure asks about.
  void set_verbose(bool verbose) { verbose_ = verbose; }

  /// Stores @p check and prints it.
  void add(Check check);
  /// Stores @p check without printing (shown in the JSON only).
  void keep(Check check);
  const std::vector<Check>& checks() const { return checks_; }
  bool failed() const { return counts().failed > 0; }
  Counts counts() const;
  /// Passed correctness cases (natively or on the emulator), and those of them whose values were
  /// also judged outside the test process (grade/outputs.hpp).
  struct Outside {
    int passed = 0, judged = 0;
  };
  Outside outside() const;
  /// 0 every check ran and passed; 1 something failed; 2 nothing failed but some checks did not run.
  int exit_code() const;
  /// The result line ("result: 8 passed, 0 failed, 5 not run here → exit 2") and what N/A means.
  void print_summary(const std::string& not_run_reason) const;
  /// Every check as JSON, with "summary" counts.
  nlohmann::json to_json() const;

 private:
  void print(const Check& check) const;
  bool quiet_;
  bool verbose_ = false;
  std::ostream* out_;
  std::vector<Check> checks_;
};

/// The printed word for a status ("PASS", "FAIL", "N/A ", "EMU ok", ...), painted on a terminal.
std::string status_word(Status status, bool colour);

}  // namespace gpulab::cli
