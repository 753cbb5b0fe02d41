/// @file progress.hpp
/// @brief The learner's progress, kept in .gpulab/ at the top of the tree (never among the
/// learner's sources), and `gpulab next`.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "grade.hpp"
#include "paths.hpp"

namespace gpulab::cli {

/// Records the result of grading the learner's own copy of a lab (labs/NN-slug).
void record_progress(const Paths& paths, const GradeResult& result, const std::string& number);
/// {"01": {"passed": .., "failed": .., "not_run": .., "exit": .., "date": ..}, ...}
nlohmann::json load_progress(const Paths& paths);
/// One word and a count for `gpulab list`: "complete", "complete where it can run here; ...",
/// "in progress: 5 of 16 checks pass", "not graded yet".
std::string progress_line(const nlohmann::json& progress, const std::string& number);

/// `gpulab next`: the first lab of the path that is not complete, and what to do.
int next_lab(const Paths& paths);

}  // namespace gpulab::cli
