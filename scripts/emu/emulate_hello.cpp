/// @file emulate_hello.cpp
/// @brief Lab 01 on the CPU block emulator (`scripts/emulate 01`): launch configurations, vector
/// add (exact), SAXPY (within 2u(|αx| + |y|)) with and without a block cap, RGB → grey (within
/// 4u·Σ|terms|) and the timing helper, at awkward sizes and alignments, with guard bands.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "guarded.hpp"
#include "hello.hpp"

namespace {
void checks(emu::Tally& tally) {
  std::mt19937 rng(2026);
  std::uniform_real_distribution<float> uniform(-100.0f, 100.0f);
  const double u = std::ldexp(1.0, -24);

  const lab01::Launch1D c1 = lab01::launch_config_1d(1000, 256, 1 << 20);
  tally.check(c1.blocks == 4 && c1.threads == 256, "launch_config_1d(1000, 256)");
  const lab01::Launch2D c2 = lab01::launch_config_2d(1920, 1080, dim3(32, 8));
  tally.check(c2.blocks.x == 60 && c2.blocks.y == 135, "launch_config_2d(1920, 1080, 32 x 8)");

  for (std::int64_t n : {1, 3, 4, 5, 255, 1000, 4099, 20000}) {
    for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
      std::vector<float> a(n), b(n);
      for (auto& v : a) v = uniform(rng);
      for (auto& v : b) v = uniform(rng);
      const std::string where = " n=" + std::to_string(n) + (offset ? " misaligned" : "");
      {
        emu::Guarded<float> da(a, offset), db(b, offset), dc(std::vector<float>(n, NAN), offset);
        lab01::vector_add(da.data(), db.data(), dc.data(), n, nullptr);
        const std::vector<float> c = dc.values();
        bool ok = true;
        for (std::int64_t i = 0; i < n; ++i) ok = ok && c[i] == a[i] + b[i];
        tally.check(ok, "vector_add" + where, "an element is not a[i] + b[i] exactly");
        tally.check(da.stray_writes() + db.stray_writes() + dc.stray_writes() == 0, "vector_add" + where + " guard bands");
      }
      for (std::int64_t max_blocks : {std::int64_t{0}, std::int64_t{1}, std::int64_t{3}}) {
        const float alpha = 1.5f;
        emu::Guarded<float> dx(a, offset), dy(b, offset), dz(std::vector<float>(n, NAN), offset);
        lab01::saxpy(alpha, dx.data(), dy.data(), dz.data(), n, max_blocks, nullptr);
        const std::vector<float> z = dz.values();
        bool ok = true;
        for (std::int64_t i = 0; i < n; ++i) {
          const double want = static_cast<double>(alpha) * a[i] + b[i];
          ok = ok && std::fabs(z[i] - want) <= 2 * u * (std::fabs(alpha * a[i]) + std::fabs(b[i]));
        }
        const std::string what = "saxpy" + where + " max_blocks=" + std::to_string(max_blocks);
        tally.check(ok, what, "an element is not alpha * x[i] + y[i]");
        tally.check(dx.stray_writes() + dy.stray_writes() + dz.stray_writes() == 0, what + " guard bands");
      }
    }
  }

  for (const auto& [w, h] : {std::pair<int, int>{1, 1}, {33, 9}, {100, 1}, {1, 100}, {257, 31}}) {
    std::vector<float> rgb(3 * static_cast<std::size_t>(w) * h);
    for (auto& v : rgb) v = std::fabs(uniform(rng)) / 100.0f;
    emu::Guarded<float> drgb(rgb), dgrey(std::vector<float>(static_cast<std::size_t>(w) * h, NAN));
    lab01::rgb_to_grey(drgb.data(), dgrey.data(), w, h, nullptr);
    const std::vector<float> grey = dgrey.values();
    bool ok = true;
    for (std::size_t p = 0; p < grey.size(); ++p) {
      const double r = rgb[3 * p], g = rgb[3 * p + 1], b = rgb[3 * p + 2];
      const double want = lab01::kLumaR * r + lab01::kLumaG * g + lab01::kLumaB * b;
      ok = ok && std::fabs(grey[p] - want) <= 4 * u * (std::fabs(lab01::kLumaR * r) + std::fabs(lab01::kLumaG * g) + std::fabs(lab01::kLumaB * b)) + 1e-7;
    }
    const std::string what = "rgb_to_grey " + std::to_string(w) + "x" + std::to_string(h);
    tally.check(ok, what, "a pixel differs from 0.299 R + 0.587 G + 0.114 B");
    tally.check(drgb.stray_writes() + dgrey.stray_writes() == 0, what + " guard bands");
  }

  {
    const std::int64_t n = 5000;
    std::vector<float> a(n, 1.0f), b(n, 2.0f);
    emu::Guarded<float> da(a), db(b), dc(std::vector<float>(n, 0.0f));
    const float ms = lab01::time_vector_add_ms(da.data(), db.data(), dc.data(), n);
    tally.check(ms >= 0.0f && dc.values() == std::vector<float>(n, 3.0f), "time_vector_add_ms runs the addition and returns a time");
  }
}
}  // namespace

int main() { return emu::run_driver("01", checks); }
