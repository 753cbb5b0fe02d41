/// @file verdict.hpp
/// @brief Deciding a performance check from noisy measurements.
///
/// Each round measures the learner and the reference once (each as a fraction of a baseline
/// timed in the same process). The verdict compares the medians: learner ≥ threshold ×
/// reference. Rounds continue, up to a cap in rounds and in seconds, while
///   - fewer than `min_rounds` rounds are in, or
///   - either side's coefficient of variation is above `max_cv`, or
///   - the ratio lies within `margin` of the threshold, where noise could flip it.
/// A verdict taken at the cap says so, with the spread, so nobody mistakes it for a clean one.
#pragma once

#include <string>
#include <vector>

namespace gpulab::cli {

struct VerdictRules {
  int min_rounds = 3;
  int max_rounds = 10;
  double max_cv = 0.02;
  double margin = 0.05;
  double time_cap_s = 120.0;
};

struct Verdict {
  bool decided = false;  ///< false: measure another round
  bool pass = false;
  double learner = 0.0, reference = 0.0;  ///< medians
  double ratio = 0.0;                     ///< learner / reference (or learner alone without a reference)
  double cv_learner = 0.0, cv_reference = 0.0;
  std::string note;  ///< why it was (or was not yet) decided
};

/// @p reference empty: the learner's medians are compared with @p threshold directly (e.g. a
/// reference solution against its absolute target). @p elapsed_s: time spent so far.
Verdict decide(const std::vector<double>& learner, const std::vector<double>& reference, double threshold,
               double elapsed_s, const VerdictRules& rules = {});

/// The rules in words, from their values: "at least 3 rounds; more, up to 10 or 120 s, while a
/// side's spread is above 2 % or the result is within 5 % of the threshold".
std::string describe_rules(const VerdictRules& rules);

}  // namespace gpulab::cli
