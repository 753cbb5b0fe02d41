/// @file reference_gemm.hpp
/// @brief Lab 03's yardstick: C = alpha·A·B + beta·C in fp64 on the CPU, with the error bound an
/// fp32 GEMM must meet element by element.
///
/// The bound. A dot product of length K computed in fp32, in any order of additions, with or
/// without fused multiply-adds, is within γ_K·Σ|aₖ|·|bₖ| of the exact value, γ_K = K·u/(1 − K·u),
/// u = 2⁻²⁴ (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §3.1). Scaling by
/// alpha and adding beta·C cost two more roundings. So every element must satisfy
///   |C − R|ᵢⱼ ≤ c·(K + 2)·u·(|alpha|·(|A|·|B|)ᵢⱼ + |beta|·|C₀ᵢⱼ|)
/// with c = 2 covering 1/(1 − K·u) for every K below 2²². A lost term of the sum, a term counted
/// twice or a stale tile exceeds it by orders of magnitude (the tests check that it does).
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "gpulab/compare.hpp"

namespace lab03::testing {

/// The bound's constant c (see the file comment).
inline constexpr double kBoundFactor = 2.0;

/// An exact-enough product and the bound each element of an fp32 result must meet.
struct Expected {
  std::vector<double> value;  ///< alpha·A·B + beta·C₀ in fp64
  std::vector<double> bound;  ///< kBoundFactor·(K + 2)·u·(|alpha|·(|A|·|B|) + |beta|·|C₀|)
};

/// Row-major A (M × K), B (K × N), C0 (M × N; ignored when beta == 0, as BLAS ignores C).
inline Expected reference_gemm(int M, int N, int K, double alpha, const std::vector<float>& A,
                               const std::vector<float>& B, double beta, const std::vector<float>& C0) {
  const std::size_t m = M, n = N, k = K;
  std::vector<double> dot(m * n, 0.0), magnitude(m * n, 0.0);
  // i-k-j order: the inner loop runs along rows of B and of the result (cache-friendly).
  for (std::size_t i = 0; i < m; ++i) {
    double* d = &dot[i * n];
    double* g = &magnitude[i * n];
    for (std::size_t p = 0; p < k; ++p) {
      const double a = A[i * k + p], abs_a = std::fabs(a);
      const float* b = &B[p * n];
      for (std::size_t j = 0; j < n; ++j) {
        d[j] += a * b[j];
        g[j] += abs_a * std::fabs(static_cast<double>(b[j]));
      }
    }
  }
  Expected e{std::vector<double>(m * n), std::vector<double>(m * n)};
  const double scale = kBoundFactor * (static_cast<double>(K) + 2.0) * gpulab::kFp32UnitRoundoff;
  for (std::size_t x = 0; x < m * n; ++x) {
    const double c0 = beta == 0.0 ? 0.0 : static_cast<double>(C0[x]);
    e.value[x] = alpha * dot[x] + beta * c0;
    e.bound[x] = scale * (std::fabs(alpha) * magnitude[x] + std::fabs(beta) * std::fabs(c0));
  }
  return e;
}

}  // namespace lab03::testing
