/// @file compare.hpp
/// @brief Compare a result with a reference: bitwise, or elementwise within a bound derived from
/// the arithmetic. NaN and Inf always fail. Host-only.
///
/// Bounds follow the operation, not a fixed 1e-5. For one fp32 rounding of an exact value w the
/// error is at most u·|w| with u = 2⁻²⁴ (unit roundoff); an expression of k roundings is bounded
/// by about k·u·(sum of the magnitudes of its terms). Tests build their bound per element from
/// that, e.g. SAXPY z = a·x + y: |z − w| ≤ 2u·(|a·x| + |y|) whether or not the compiler fuses
/// the multiply-add.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace gpulab {

/// Unit roundoff of IEEE fp32 (round to nearest): 2⁻²⁴.
inline constexpr double kFp32UnitRoundoff = 5.9604644775390625e-08;

/// One element that did not match.
struct Mismatch {
  std::size_t index = 0;  ///< position in the flattened array
  double got = 0.0;       ///< the value under test
  double want = 0.0;      ///< the reference value
  double bound = 0.0;     ///< the allowed |got − want| (0 for bitwise checks)
};

/// The outcome of one comparison; `summary()` is what the scorecard prints.
struct CompareResult {
  std::size_t count = 0;          ///< elements compared
  std::size_t mismatches = 0;     ///< elements outside their bound (non-finite ones included)
  std::size_t non_finite = 0;     ///< NaN or Inf among the values under test
  double max_error = 0.0;         ///< largest |got − want| over finite elements
  double bound_at_max = 0.0;      ///< the bound of the element with the largest error ratio
  double worst_ratio = 0.0;       ///< max over elements of |got − want| / bound (inf if bound is 0)
  std::vector<Mismatch> first;    ///< the first few mismatches, in index order
  static constexpr std::size_t kKeep = 10;  ///< how many mismatches are kept

  /// True when every element is within its bound (and none is NaN or Inf).
  bool ok() const { return mismatches == 0; }
  /// One line: "ok: 1000 elements, max error 1.2e-07 (bound 2.4e-07)" or the first mismatch.
  std::string summary(const std::string& what) const;
};

namespace detail {
inline void note_mismatch(CompareResult& r, std::size_t i, double got, double want, double bound) {
  ++r.mismatches;
  if (r.first.size() < CompareResult::kKeep) r.first.push_back({i, got, want, bound});
}
}  // namespace detail

/// Bitwise equality, for copies, transposes and integer-valued results. A NaN never matches.
template <class T>
CompareResult compare_bitwise(const T* got, const T* want, std::size_t n) {
  CompareResult r;
  r.count = n;
  for (std::size_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got[i]);
    const double w = static_cast<double>(want[i]);
    if (!std::isfinite(g)) ++r.non_finite;
    const bool same = std::memcmp(&got[i], &want[i], sizeof(T)) == 0 && std::isfinite(g);
    if (!same) {
      detail::note_mismatch(r, i, g, w, 0.0);
      if (std::isfinite(g) && std::fabs(g - w) > r.max_error) r.max_error = std::fabs(g - w);
      r.worst_ratio = std::numeric_limits<double>::infinity();
    }
  }
  return r;
}

/// compare_bitwise on two vectors; a size difference is a mismatch.
template <class T>
CompareResult compare_bitwise(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) {
    CompareResult r;
    r.count = want.size();
    detail::note_mismatch(r, std::min(got.size(), want.size()), 0.0, 0.0, 0.0);
    return r;
  }
  return compare_bitwise(got.data(), want.data(), want.size());
}

/// |got[i] − want[i]| ≤ bound[i] for every i, with want and bound in fp64.
CompareResult compare_within(const std::vector<float>& got, const std::vector<double>& want,
                             const std::vector<double>& bound);

}  // namespace gpulab
