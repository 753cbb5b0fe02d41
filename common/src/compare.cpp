/// @file compare.cpp
/// @brief Elementwise comparison within per-element bounds, and the one-line summaries.
#include "gpulab/compare.hpp"

#include <cstdio>

namespace gpulab {

CompareResult compare_within(const std::vector<float>& got, const std::vector<double>& want,
                             const std::vector<double>& bound) {
  CompareResult r;
  r.count = want.size();
  if (got.size() != want.size() || bound.size() != want.size()) {
    detail::note_mismatch(r, std::min(got.size(), want.size()), 0.0, 0.0, 0.0);
    return r;
  }
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = got[i];
    if (!std::isfinite(g)) {
      ++r.non_finite;
      detail::note_mismatch(r, i, g, want[i], bound[i]);
      r.worst_ratio = std::numeric_limits<double>::infinity();
      continue;
    }
    const double err = std::fabs(g - want[i]);
    const double ratio = bound[i] > 0.0 ? err / bound[i]
                                        : (err > 0.0 ? std::numeric_limits<double>::infinity() : 0.0);
    if (err > r.max_error) r.max_error = err;
    if (ratio > r.worst_ratio) {
      r.worst_ratio = ratio;
      r.bound_at_max = bound[i];
    }
    if (err > bound[i]) detail::note_mismatch(r, i, g, want[i], bound[i]);
  }
  return r;
}

std::string CompareResult::summary(const std::string& what) const {
  char line[512];
  if (mismatches == 0) {
    std::snprintf(line, sizeof line, "%s: ok, %zu elements, max error %.3g (%.2f of its bound)",
                  what.c_str(), count, max_error, worst_ratio);
    return line;
  }
  if (first.empty()) {
    std::snprintf(line, sizeof line, "%s: size mismatch", what.c_str());
    return line;
  }
  const Mismatch& m = first.front();
  std::snprintf(line, sizeof line,
                "%s: %zu of %zu elements wrong (%zu NaN/Inf); first at index %zu: got %.9g, "
                "want %.9g (allowed error %.3g)",
                what.c_str(), mismatches, count, non_finite, m.index, m.got, m.want, m.bound);
  return line;
}

}  // namespace gpulab
