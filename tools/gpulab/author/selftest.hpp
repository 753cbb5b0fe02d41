/// @file selftest.hpp
/// @brief `gpulab selftest`: the project's own tests (the README's test command).
///
/// 1. builds everything, skeletons and mutants included (and their emulator builds);
/// 2. CTest over the unit tests, read from its JUnit file (a [gpu] unit case reported passed on a
///    machine without a GPU is itself a failure);
/// 3. per lab: lab.json and the plants' manifest load; the lesson has a section per TODO;
/// 4. per lab: the skeleton and every mutant must FAIL wherever they can run: natively, and,
///    where a lab's [gpu] cases cannot run here, on the CPU emulator;
/// 5. per lab: `grade --solutions` must have no failure (this runs every reference case, once);
/// 6. per lab: planted submissions (tests/NN-slug/planted/) must be caught, each for its reason,
///    and grading must leave them unchanged;
/// 7. the class (selftest_class.hpp): lab 06's quick class of submissions, hostile ones among
///    them, through `grade-class` (all labs, or lab 06 alone; --class: the whole class, alone);
/// 8. `sync --check` (unless labs/ holds the learner's work).
/// Steps 3-6 run for two labs at a time, each in a process of its own, the longest first and never
/// two distributed labs at once (--jobs 1: one lab after another).
/// The last line is "selftest: N passed, N failed, N skipped"; build/selftest/selftest.json holds
/// every row, and build/selftest/grade-NN-solutions.json each reference's scorecard.
#pragma once

#include <string>

#include "base/paths.hpp"

namespace gpulab::cli {

struct SelftestOptions {
  std::string lab;               ///< only this lab ("" = all)
  bool build = true;             ///< build first
  bool gpu_plants_only = false;  ///< grade only the planted submissions that need a GPU (CI does the rest)
  int jobs = 2;                  ///< 2: two labs at a time (never two distributed ones); 1: one after another
  bool class_only = false;       ///< the whole class (every submission), and nothing else
};

int selftest(const Paths& paths, const SelftestOptions& options);

}  // namespace gpulab::cli
