/// @file formats.cpp
/// @brief Lab 04: fp32 to and from fp16, bf16, tf32 and fp8 (E4M3, E5M2) by hand, round to
/// nearest even, and a dot product in those formats with its error bound (formats.hpp).
#include "formats.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace lab04 {
namespace {

std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

float float_of(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

/// CUDA's canonical NaN, what its conversions to fp32 return for every NaN they read.
constexpr std::uint32_t kCanonicalNaN = 0x7FFFFFFFu;

}  // namespace

// ---------------------------------------------------------------------------------------------
// fp16
// ---------------------------------------------------------------------------------------------

// TODO(04.1): fp32 to fp16 and back: round to nearest even, subnormals, overflow, NaN
// See lessons/04-tensor-cores.md, section "TODO(04.1)".
std::uint16_t fp32_to_fp16(float) { return 0; }
float fp16_to_fp32(std::uint16_t) { return 0.0f; }

// ---------------------------------------------------------------------------------------------
// bf16 and tf32: fp32 with fewer fraction bits
// ---------------------------------------------------------------------------------------------

// TODO(04.2): bf16 and tf32: fp32 with fewer fraction bits
// See lessons/04-tensor-cores.md, section "TODO(04.2)".
std::uint16_t fp32_to_bf16(float) { return 0; }
float bf16_to_fp32(std::uint16_t) { return 0.0f; }
float fp32_to_tf32(float x) { return x; }

// ---------------------------------------------------------------------------------------------
// fp8
// ---------------------------------------------------------------------------------------------

// TODO(04.3): fp8 E4M3 and E5M2, with and without saturation
// See lessons/04-tensor-cores.md, section "TODO(04.3)".
std::uint8_t fp32_to_e4m3(float, Saturation) { return 0; }
std::uint8_t fp32_to_e5m2(float, Saturation) { return 0; }
float e4m3_to_fp32(std::uint8_t) { return 0.0f; }
float e5m2_to_fp32(std::uint8_t) { return 0.0f; }

// ---------------------------------------------------------------------------------------------
// A dot product in low precision, and its error (given: round_to, unit_roundoff)
// ---------------------------------------------------------------------------------------------

float round_to(float x, Format format) {
  switch (format) {
    case Format::kFp32: return x;
    case Format::kFp16: return fp16_to_fp32(fp32_to_fp16(x));
    case Format::kBf16: return bf16_to_fp32(fp32_to_bf16(x));
    case Format::kTf32: return fp32_to_tf32(x);
  }
  return x;
}

double unit_roundoff(Format format) {
  switch (format) {
    case Format::kFp32: return std::ldexp(1.0, -24);
    case Format::kFp16: return std::ldexp(1.0, -11);
    case Format::kBf16: return std::ldexp(1.0, -8);
    case Format::kTf32: return std::ldexp(1.0, -11);
  }
  return 0.0;
}

// TODO(04.4): A dot product in low precision, and the bound on its error
// See lessons/04-tensor-cores.md, section "TODO(04.4)".
float dot_product(const float*, const float*, int, Format, Format) { return 0.0f; }
double dot_error_bound(int, Format, Format) { return 0.0; }

}  // namespace lab04
