/// @file watch.hpp
/// @brief `gpulab watch NN`: grade again whenever a file of the lab changes.
#pragma once

#include "base/paths.hpp"
#include "grade/grade.hpp"

namespace gpulab::cli {

/// Grades, then re-grades whenever a file of the lab (or the submission folder) changes; stops
/// with Ctrl-C, or after @p max_runs grades (0: never). @p poll_s: how often to look.
int watch(const Paths& paths, GradeOptions options, int max_runs, double poll_s);

}  // namespace gpulab::cli
