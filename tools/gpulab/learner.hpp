/// @file learner.hpp
/// @brief The learner's loop around grading: progress (kept in .gpulab/ at the top of the tree,
/// never among the learner's sources), `gpulab next`, a ladder of hints per TODO, and
/// `gpulab watch` to re-grade on every save.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "grade.hpp"
#include "labs.hpp"

namespace gpulab::cli {

/// Records the result of grading the learner's own copy of a lab (labs/NN-slug).
void record_progress(const Paths& paths, const GradeResult& result, const std::string& number);
/// {"01": {"passed": .., "failed": .., "not_run": .., "exit": .., "date": ..}, ...}
nlohmann::json load_progress(const Paths& paths);
/// One word and a count for `gpulab list`: "complete", "complete on CPU (GPU checks pending)",
/// "in progress: 5 of 16 checks pass", "not graded yet".
std::string progress_line(const nlohmann::json& progress, const std::string& number);

/// `gpulab next`: the first lab of the path that is not complete, and what to do.
int next_lab(const Paths& paths);

/// `gpulab hint NN [k]`: without k, the lab's TODOs and how many hints each has; with k (the
/// number after the dot, or the full id), the next hint of that TODO (--level: a given one;
/// --reset: start over). The last hint of every ladder points at the lesson section.
int hint(const Paths& paths, const std::string& lab, const std::string& todo, int level, bool reset);

/// `gpulab watch NN`: grade, then re-grade whenever a file of the lab (or the submission folder)
/// changes; stop with Ctrl-C, or after @p max_runs grades (0: never).
int watch(const Paths& paths, GradeOptions options, int max_runs, double poll_s);

}  // namespace gpulab::cli
