/// @file random.cpp
/// @brief The run's seed and reproducible random fills.
#include "gpulab/random.hpp"

#include "gpulab/hash.hpp"

#include <cstdlib>
#include <string>

namespace gpulab {
namespace {

std::uint64_t& seed_slot() {
  static std::uint64_t seed = [] {
    if (const char* env = std::getenv("GPULAB_SEED"); env != nullptr && *env != '\0') {
      return static_cast<std::uint64_t>(std::strtoull(env, nullptr, 10));
    }
    std::random_device device;
    return (static_cast<std::uint64_t>(device()) << 32) ^ device();
  }();
  return seed;
}

// FNV-1a of the salt, then a splitmix64 finaliser so that nearby seeds give unrelated streams.
std::uint64_t mix(std::uint64_t seed, std::string_view salt) {
  std::uint64_t z = seed ^ fnv1a64(salt);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

std::uint64_t test_seed() { return seed_slot(); }
void set_test_seed(std::uint64_t seed) { seed_slot() = seed; }

Rng Rng::for_test(std::string_view salt) { return Rng(mix(test_seed(), salt)); }

float Rng::uniform(float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  float v = 0.0f;
  do {
    v = dist(engine_);
  } while (v == 0.0f);
  return v;
}

std::int64_t Rng::integer(std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(engine_);
}

std::vector<float> Rng::uniform_vector(std::size_t n, float lo, float hi) {
  std::vector<float> v(n);
  for (float& x : v) x = uniform(lo, hi);
  return v;
}

std::vector<float> Rng::integer_vector(std::size_t n, int lo, int hi) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(integer(lo, hi));
  return v;
}

}  // namespace gpulab
