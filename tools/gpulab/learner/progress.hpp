/// @file progress.hpp
/// @brief The learner's progress, kept in .gpulab/ at the top of the tree (never among the
/// learner's sources), and `gpulab next`.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/paths.hpp"
#include "grade/grade.hpp"

namespace gpulab::cli {

/// Records the result of grading the learner's own copy of a lab (labs/NN-slug): the whole lab
/// (@p part 0; for a lab of @p parts parts, each part too, from its cases' checks), or one part.
void record_progress(const Paths& paths, const GradeResult& result, const std::string& number, int part = 0, int parts = 0);
/// The progress key of part @p part of lab @p number: "04/2".
std::string part_key(const std::string& number, int part);
/// {"01": {"passed": .., "failed": .., "not_run": .., "exit": .., "date": ..}, "04/1": {...}, ...}
nlohmann::json load_progress(const Paths& paths);
/// One word and a count for `gpulab list`: "complete", "complete where it can run here; ...",
/// "in progress: 5 of 16 checks pass", "not graded yet"; for a lab of @p parts parts, one per part.
std::string progress_line(const nlohmann::json& progress, const std::string& number, int parts = 0);

/// `gpulab next`: the first lab of the path that is not complete, and what to do.
int next_lab(const Paths& paths);

}  // namespace gpulab::cli
