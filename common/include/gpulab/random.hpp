/// @file random.hpp
/// @brief Reproducible, non-trivial test data. Host-only.
///
/// Every test run has one seed: GPULAB_SEED from the environment (the grader sets it and prints
/// it; `gpulab grade NN --seed S` reproduces a run), else a fresh random one. Each test derives
/// its own stream from the seed and a salt (its name), so adding a test does not change the data
/// of the others.
#pragma once

#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

namespace gpulab {

/// The run's seed (see the file comment). Stable for the life of the process.
std::uint64_t test_seed();

/// Overrides the run's seed (used by the test main and by unit tests).
void set_test_seed(std::uint64_t seed);

/// A random stream: mt19937_64 seeded from (seed, salt).
class Rng {
 public:
  /// A stream seeded with @p seed directly (tests usually want for_test).
  explicit Rng(std::uint64_t seed) : engine_(seed) {}
  /// A stream for one test: the run's seed mixed with @p salt.
  static Rng for_test(std::string_view salt);

  /// Uniform in [lo, hi), never exactly 0: zero inputs hide bugs (0·x = 0, x + 0 = x).
  float uniform(float lo, float hi);
  /// Integer in [lo, hi], inclusive.
  std::int64_t integer(std::int64_t lo, std::int64_t hi);
  /// n values uniform in [lo, hi), none exactly 0.
  std::vector<float> uniform_vector(std::size_t n, float lo = -1.0f, float hi = 1.0f);
  /// n integer-valued floats in [lo, hi]: sums of these are exact in fp32 while below 2²⁴.
  std::vector<float> integer_vector(std::size_t n, int lo, int hi);

  /// The underlying engine, for distributions of your own.
  std::mt19937_64& engine() { return engine_; }

 private:
  std::mt19937_64 engine_;
};

}  // namespace gpulab
