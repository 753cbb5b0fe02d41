/// @file outputs.hpp
/// @brief Judging a case by the values its checks compared, outside the process that computed
/// them. Under the grader a test's comparisons (gpulab::testing::check_within, check_bitwise) send
/// their values beside the records: gpulab-launch writes them to a file and lists each block with
/// its hash in its frame. Once a submission's case has passed by its own checks, the grader runs
/// the reference on the same case with the same seed (a separate, trusted run, which sends what
/// it compared with and the bounds too) and holds the submission's values to the reference's
/// expected values and bounds, with the same comparison. A process whose own checks say "passed"
/// over wrong values — a replaced comparison, a patched assertion, forged records — fails here.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpulab::cli {

/// What the comparison outside the process found.
struct OutsideVerdict {
  int compared = 0;                   ///< checks compared (over all ranks)
  std::vector<std::string> problems;  ///< each a reason to fail the case; empty: the values hold
};

/// Holds @p submission's output records (a run's check.data["outputs"], "got" only) to
/// @p reference's ("all": got, want, bound) on the same case, seed and ranks: the same checks in
/// the same order on every rank, each value within the reference's bound of the reference's
/// expected value (bitwise where the check is bitwise). With @p reference the submission's own
/// run (grade --solutions: one trusted run), its values are held to what it compared them with.
OutsideVerdict judge_outputs(const nlohmann::json& submission, const nlohmann::json& reference);

/// The bytes of one part ("got", "want", "bound") of an output record, read from the launcher's
/// file and checked against the hash in its frame; false with @p why when missing or changed.
bool read_part(const nlohmann::json& output, const std::string& part, std::string& bytes, std::string& why);

}  // namespace gpulab::cli
