/// @file emulate_gemm.cpp
/// @brief Runs every rung of lab 03 on the CPU block emulator (emu.hpp) at awkward shapes,
/// against the tests' fp64 reference and error bound. Built by scripts/emulate-gemm.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gemm.hpp"
#include "reference_gemm.hpp"

namespace {
constexpr float kSentinel = -12345.678f;  // what the guard bands hold
}  // namespace

int main() {
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
  int failures = 0;
  for (const Shape& s : shapes) {
    const std::size_t a_count = std::size_t(s.M) * s.K, b_count = std::size_t(s.K) * s.N, c_count = std::size_t(s.M) * s.N;
    std::vector<float> A(a_count), B(b_count), C0(c_count);
    for (float& v : A) v = uniform(rng);
    for (float& v : B) v = uniform(rng);
    for (float& v : C0) v = s.beta == 0 ? std::numeric_limits<float>::quiet_NaN() : uniform(rng);
    const auto want = lab03::testing::reference_gemm(s.M, s.N, s.K, s.alpha, A, B, s.beta, C0);
    for (int r = 1; r <= lab03::kRungs; ++r) {
      // Buffers as the GPU would see them: 16-byte aligned, then `offset` floats in, with guard
      // bands on both sides that nothing may write, wide enough to catch a whole extra row.
      const std::size_t kGuard = 64 + static_cast<std::size_t>(std::max(s.N, s.K));
      auto buffer = [&](const std::vector<float>& v) {
        std::vector<float4> mem((v.size() + s.offset + 2 * kGuard) / 4 + 2);
        float* base = reinterpret_cast<float*>(mem.data());
        std::fill(base, base + mem.size() * 4, kSentinel);
        std::copy(v.begin(), v.end(), base + kGuard + s.offset);
        return mem;
      };
      std::vector<float4> a_mem = buffer(A), b_mem = buffer(B), c_mem = buffer(C0);
      float* a = reinterpret_cast<float*>(a_mem.data()) + kGuard + s.offset;
      float* b = reinterpret_cast<float*>(b_mem.data()) + kGuard + s.offset;
      float* c = reinterpret_cast<float*>(c_mem.data()) + kGuard + s.offset;
      lab03::sgemm(static_cast<lab03::Rung>(r), s.M, s.N, s.K, s.alpha, a, b, s.beta, c, nullptr);
      // Outside C, and anywhere in A or B: nothing may have changed.
      std::size_t stray = 0;
      auto untouched = [&](const std::vector<float4>& mem, const float* data, const std::vector<float>& v, bool output) {
        const float* base = reinterpret_cast<const float*>(mem.data());
        for (std::size_t i = 0; i < mem.size() * 4; ++i) {
          const float* p = base + i;
          const bool inside = p >= data && p < data + v.size();
          if (!inside && std::memcmp(p, &kSentinel, sizeof(float)) != 0) ++stray;
          if (inside && !output && std::memcmp(p, &v[p - data], sizeof(float)) != 0) ++stray;
        }
      };
      untouched(a_mem, a, A, false);
      untouched(b_mem, b, B, false);
      untouched(c_mem, c, C0, true);
      std::size_t wrong = 0, first = c_count;
      for (std::size_t i = 0; i < c_count; ++i) {
        const double err = c[i] - want.value[i];
        if (!(err <= want.bound[i] && -err <= want.bound[i])) {
          if (wrong++ == 0) first = i;
        }
      }
      std::printf("v%d %5dx%5dx%5d offset %d: %s", r, s.M, s.N, s.K, s.offset, wrong || stray ? "WRONG" : "ok");
      if (stray) std::printf(" (%zu floats written outside C or inside A, B)", stray);
      if (wrong) {
        std::printf(" (%zu elements; first C[%zu][%zu] = %g, want %g ± %g)", wrong, first / s.N, first % s.N, c[first],
                    want.value[first], want.bound[first]);
      }
      std::printf("\n");
      failures += wrong != 0 || stray != 0;
    }
  }
  std::printf("emulate-gemm: %d of %d runs wrong\n", failures, static_cast<int>(sizeof shapes / sizeof shapes[0]) * lab03::kRungs);
  return failures == 0 ? 0 : 1;
}
