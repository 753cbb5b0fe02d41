/// @file selftest.hpp
/// @brief `gpulab selftest`: the project's own tests (the README's test command).
///
/// 1. builds everything, skeletons and mutants included;
/// 2. CTest: unit tests and every reference test case (GPU cases skipped without a GPU; a GPU
///    case reported as passed on a machine without one is itself a failure);
/// 3. per lab: the skeleton and every mutant must FAIL wherever they can run;
/// 4. per lab: `grade --solutions` must have no failure;
/// 5. per lab: planted faulty submissions (tests/NN-slug/planted.json) must be caught, each for
///    its own reason, and grading must leave them unchanged;
/// 6. `sync --check` (unless labs/ holds the learner's work) and every region has its lesson
///    section.
/// The last line is "selftest: N passed, N failed, N skipped".
#pragma once

#include <string>

#include "labs.hpp"

namespace gpulab::cli {

struct SelftestOptions {
  std::string lab;        ///< only this lab ("" = all)
  bool build = true;      ///< build first
  bool gpu_plants_only = false;  ///< grade only the planted submissions that need a GPU (CI does the rest)
};

int selftest(const Paths& paths, const SelftestOptions& options);

}  // namespace gpulab::cli
