/// @file emulate_gemm.cpp
/// @brief Runs every rung of lab 03 on the CPU block emulator (emu.hpp) at awkward shapes,
/// against the tests' fp64 reference and error bound. Built by `scripts/emulate 03`.
#include <cstdio>
#include <string>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gemm.hpp"
#include "guarded.hpp"
#include "reference_gemm.hpp"

namespace {
void checks(emu::Tally& tally) {
  struct Shape {
    int M, N, K;
    float alpha, beta;
    int offset;  // floats past a 16-byte boundary: 0 allows 128-bit accesses, 1 or 2 forbids them
  };
  const Shape shapes[] = {{1, 1, 1, 1, 0, 0},       {17, 31, 13, 1, 0, 0},      {127, 129, 255, 1.5f, -0.75f, 0},
                          {128, 128, 16, 1, 1, 0},  {130, 132, 40, 2, 0.5f, 1}, {3, 5, 700, 1, 0, 0},
                          {64, 256, 64, 1, 0, 0},   {200, 77, 33, -1, 2, 0},    {256, 256, 36, 1, 0, 2},
                          {129, 4, 17, 0.5f, 0, 0}};
  std::mt19937 rng(2026);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const Shape& s : shapes) {
    const std::size_t a_count = std::size_t(s.M) * s.K, b_count = std::size_t(s.K) * s.N, c_count = std::size_t(s.M) * s.N;
    std::vector<float> A(a_count), B(b_count), C0(c_count);
    for (float& v : A) v = uniform(rng);
    for (float& v : B) v = uniform(rng);
    for (float& v : C0) v = s.beta == 0 ? std::numeric_limits<float>::quiet_NaN() : uniform(rng);
    const auto want = lab03::testing::reference_gemm(s.M, s.N, s.K, s.alpha, A, B, s.beta, C0);
    for (int r = 1; r <= lab03::kRungs; ++r) {
      // Buffers as the GPU would see them: aligned, then `offset` floats in, with guard bands.
      emu::Guarded<float> a(A, s.offset), b(B, s.offset), c(C0, s.offset);
      lab03::sgemm(static_cast<lab03::Rung>(r), s.M, s.N, s.K, s.alpha, a.data(), b.data(), s.beta, c.data(), nullptr);
      const std::size_t stray = a.stray_writes() + b.stray_writes() + c.stray_writes() +
                                (a.values() != A) + (b.values() != B);
      const std::vector<float> got = c.values();
      std::size_t wrong = 0, first = c_count;
      for (std::size_t i = 0; i < c_count; ++i) {
        const double err = got[i] - want.value[i];
        if (!(err <= want.bound[i] && -err <= want.bound[i])) {
          if (wrong++ == 0) first = i;
        }
      }
      char what[96], detail[200] = "";
      std::snprintf(what, sizeof what, "sgemm v%d %dx%dx%d offset %d", r, s.M, s.N, s.K, s.offset);
      if (wrong) {
        std::snprintf(detail, sizeof detail, "%zu elements outside the bound; first C[%zu][%zu] = %g, want %g +- %g", wrong,
                      first / s.N, first % s.N, got[first], want.value[first], want.bound[first]);
      }
      tally.check(wrong == 0, what, detail);
      tally.check(stray == 0, std::string(what) + " guard bands", "a write outside C, or into A or B");
    }
  }
}
}  // namespace

int main() { return emu::run_driver("03", checks); }
