/// @file guard.cpp
/// @brief Guard band patterns and checks (see guard.hpp).
#include "gpulab/guard.hpp"

#include <atomic>
#include <cstdlib>
#include <sstream>

namespace gpulab {
namespace guard {

std::uint32_t next_seed() {
  static std::atomic<std::uint32_t> counter{0x9E37u};
  return counter.fetch_add(0x61C88647u) | 1u;
}

unsigned char byte(std::size_t k, std::uint32_t seed) {
  // An xorshift of (k, seed): a different sequence per buffer, mixed so that neither zeros nor a
  // repeated float can match it by accident; 0 is mapped away so zeroed memory never matches.
  std::uint32_t x = static_cast<std::uint32_t>(k) * 0x9E3779B1u ^ seed;
  x ^= x >> 15;
  x *= 0x2C1B3C6Du;
  x ^= x >> 12;
  const auto b = static_cast<unsigned char>(x);
  return b == 0 ? 0xA5 : b;
}

std::size_t device_back_bytes() {
  static const std::size_t bytes = [] {
    const char* tight = std::getenv("GPULAB_GUARD_TIGHT");
    return tight != nullptr && *tight != '\0' && *tight != '0' ? std::size_t{0} : kBackBytes;
  }();
  return bytes;
}

void fill(unsigned char* front, unsigned char* back, std::uint32_t seed, std::size_t back_bytes) {
  // Byte k of each band counts outward from the data, so "offset 0" is the adjacent byte.
  for (std::size_t k = 0; k < kFrontBytes; ++k) front[kFrontBytes - 1 - k] = byte(k, seed);
  for (std::size_t k = 0; k < back_bytes; ++k) back[k] = byte(k, seed ^ 0xB5u);
}

GuardReport check(const unsigned char* front, const unsigned char* back, std::uint32_t seed, std::size_t back_bytes) {
  for (std::size_t k = 0; k < kFrontBytes; ++k) {
    if (front[kFrontBytes - 1 - k] != byte(k, seed)) return {false, true, k};
  }
  for (std::size_t k = 0; k < back_bytes; ++k) {
    if (back[k] != byte(k, seed ^ 0xB5u)) return {false, false, k};
  }
  return {};
}

}  // namespace guard

std::string GuardReport::describe(const std::string& buffer_name) const {
  if (intact) return buffer_name + ": guard bands intact";
  std::ostringstream msg;
  msg << buffer_name << ": out-of-bounds write " << (front ? "before the start" : "past the end") << " (byte " << byte_offset
      << (front ? " before element 0" : " after the last element") << " changed). Check the bounds test in your kernel (i < n, not i <= n).";
  return msg.str();
}

}  // namespace gpulab
