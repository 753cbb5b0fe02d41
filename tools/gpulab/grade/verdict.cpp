/// @file verdict.cpp
/// @brief Performance verdicts robust to noise (see verdict.hpp).
#include "grade/verdict.hpp"

#include <cmath>
#include <cstdio>

#include "gpulab/stats.hpp"

namespace gpulab::cli {

Verdict decide(const std::vector<double>& learner, const std::vector<double>& reference, double threshold,
               double elapsed_s, const VerdictRules& rules) {
  Verdict v;
  const int rounds = static_cast<int>(learner.size());
  v.learner = median(learner);
  v.cv_learner = coefficient_of_variation(learner);
  const bool relative = !reference.empty();
  if (relative) {
    v.reference = median(reference);
    v.cv_reference = coefficient_of_variation(reference);
    v.ratio = v.reference > 0.0 ? v.learner / v.reference : 0.0;
  } else {
    v.ratio = v.learner;
  }
  v.pass = v.ratio >= threshold;
  const bool at_cap = rounds >= rules.max_rounds || elapsed_s >= rules.time_cap_s;
  // Without a threshold nothing can flip: the figures are only recorded.
  const bool noisy = threshold > 0.0 && (v.cv_learner > rules.max_cv || v.cv_reference > rules.max_cv);
  const bool close = threshold > 0.0 && std::fabs(v.ratio - threshold) < rules.margin * threshold;
  char note[200];
  if (rounds < rules.min_rounds) {
    std::snprintf(note, sizeof note, "%d of at least %d rounds", rounds, rules.min_rounds);
    v.note = note;
    return v;
  }
  if ((noisy || close) && !at_cap) {
    if (noisy) {
      std::snprintf(note, sizeof note, "spread above %.0f %%: measuring again", 100 * rules.max_cv);
    } else {
      std::snprintf(note, sizeof note, "within %.0f %% of the threshold: measuring again", 100 * rules.margin);
    }
    v.note = note;
    return v;
  }
  v.decided = true;
  if (at_cap && (noisy || close)) {
    std::snprintf(note, sizeof note, "decided at the cap (%d rounds, %.0f s) with spread %.1f %% / %.1f %%%s", rounds,
                  elapsed_s, 100 * v.cv_learner, 100 * v.cv_reference,
                  close ? ", close to the threshold: rerun on a quiet machine to be sure" : "");
  } else {
    std::snprintf(note, sizeof note, "%d rounds, spread %.1f %% / %.1f %%", rounds, 100 * v.cv_learner, 100 * v.cv_reference);
  }
  v.note = note;
  return v;
}

std::string describe_rules(const VerdictRules& rules) {
  char text[240];
  std::snprintf(text, sizeof text,
                "at least %d rounds; more, up to %d or %.0f s, while a side's spread is above %.0f %% or the result is within %.0f %% of the "
                "threshold",
                rules.min_rounds, rules.max_rounds, rules.time_cap_s, 100 * rules.max_cv, 100 * rules.margin);
  return text;
}

}  // namespace gpulab::cli
