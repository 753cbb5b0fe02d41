/// @file plants.hpp
/// @brief Planted submissions: faulty (or unusual but right) variants of a lab's reference, each a
/// patch made with `git diff` (tests/NN-slug/planted/<name>.patch), listed with what must catch it
/// in tests/NN-slug/planted/plants.json. selftest applies each to a copy of the reference with
/// `git apply`, grades the copy, and checks the verdict.
///
/// A manifest entry:
///
///     name             what the plant is
///     patch            its patch file (paths relative to the lab folder: a/<file>, b/<file>)
///     needs_gpu        true: only a GPU can judge it (skipped elsewhere, unless without_gpu says)
///     cases            grade only these cases (default: expect_failed, when it names a case)
///     all_cases        grade every case (the default is the few above)
///     max_seconds      the whole grade must take no longer (a hang must cost seconds)
///     needs_root       true: only where the grader can sandbox (bubblewrap runs here)
///     sandbox          false: grade without the read-only mounts (to see tampering detected)
///     interrupt        also: Ctrl-C (SIGINT to the grader's process group) during the grade
///                      must end it with exit 130 and leave no process of the submission
///     ranks            distributed labs: the widths (default [3])
///     timeout_s, sanitize   as the grade options
///     expect_exit      the exit code, or a list of acceptable ones ([0, 2]: nothing failed)
///     expect_failed    the check that must fail (a distributed case matches at any W)
///     expect_detail    text that check's details must contain
///     expect_passed    checks that must still pass (the failure came from the right check)
///     expect_no_leftovers  no process of the program may survive the grade
///     without_gpu      {expect_exit, expect_failed, expect_detail}: what a grade on a machine
///                      without a GPU must say (the emulator's verdict), when it differs
///     note             why the plant is there
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/lab_config.hpp"
#include "grade/grade.hpp"

namespace gpulab::cli {

/// One manifest entry (see the file comment).
struct Plant {
  std::string name, patch;
  bool needs_gpu = false;
  std::vector<std::string> cases;
  std::vector<int> ranks{3};
  double timeout_s = 0;
  bool sanitize = false;
  bool all_cases = false;
  double max_seconds = 0;
  bool interrupt = false;
  bool sandbox = true;
  bool needs_root = false;  ///< only where the grader can sandbox (bubblewrap): skipped elsewhere
  /// Graded beside this many busy processes (a loaded machine): a gate the reference must pass
  /// whatever the machine is doing, proven with the reference itself as the "plant".
  int busy_processes = 0;
  struct Expect {
    std::vector<int> exit{1};
    std::string failed, detail;
  } expect;
  bool has_without_gpu = false;
  Expect without_gpu;
  std::vector<std::string> must_pass;
  bool no_leftovers = false;
};

/// The manifest of @p lab (empty when it has none); a bad entry is a ConfigError.
std::vector<Plant> load_plants(const LabConfig& lab);

/// Copies the reference into @p dir and applies the plant's patch there; "" or what went wrong.
std::string apply_plant(const LabConfig& lab, const Plant& plant, const fs::path& dir);

/// The options to grade a plant with: its cases, widths, a fixed seed, short performance rounds.
GradeOptions plant_grade_options(const LabConfig& lab, const Plant& plant, const fs::path& dir);

/// "" when @p result is what @p expect says, else what differs.
std::string plant_verdict(const Plant& plant, const Plant::Expect& expect, const GradeResult& result);

}  // namespace gpulab::cli
