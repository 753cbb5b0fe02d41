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

// BEGIN SOLUTION(04.1) fp32 to fp16 and back: round to nearest even, subnormals, overflow, NaN
std::uint16_t fp32_to_fp16(float x) {
  const std::uint32_t b = bits_of(x);
  const std::uint16_t sign = static_cast<std::uint16_t>((b >> 16) & 0x8000u);
  const std::uint32_t a = b & 0x7FFFFFFFu;  // |x|
  if (a > 0x7F800000u) return 0x7FFF;       // NaN, whatever its sign and payload
  // 65520 = 0x477FF000 is halfway between fp16's largest value, 65504 (fraction 0x3FF, odd), and
  // 2¹⁶: from there up (∞ included) the nearest-even result is ∞.
  if (a >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);
  if (a < 0x38800000u) {  // below 2⁻¹⁴: an fp16 subnormal, counted in units of 2⁻²⁴
    const int e = static_cast<int>(a >> 23);
    if (e < 102) return sign;  // below 2⁻²⁵: rounds to ±0 (exactly 2⁻²⁵ is a tie, to even 0, too)
    const std::uint32_t m = (a & 0x7FFFFFu) | 0x800000u;  // x = m · 2^(e − 150)
    const int shift = 126 - e;                           // x / 2⁻²⁴ = m / 2^shift, shift in [14, 24]
    std::uint32_t q = m >> shift;
    const std::uint32_t rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (q & 1u))) ++q;  // 0x3FF + 1 becomes the smallest normal
    return static_cast<std::uint16_t>(sign | q);
  }
  // Normal: exponent rebiased (127 → 15), 23 fraction bits to 10; a carry out of the fraction
  // moves into the exponent, which is right.
  std::uint32_t q = (a >> 13) - ((127u - 15u) << 10);
  const std::uint32_t rest = a & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (q & 1u))) ++q;
  return static_cast<std::uint16_t>(sign | q);
}

float fp16_to_fp32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1F) return float_of(m != 0 ? kCanonicalNaN : sign | 0x7F800000u);
  if (e == 0) {  // ±0 or a subnormal, m · 2⁻²⁴: exact in fp32
    const float magnitude = std::ldexp(static_cast<float>(m), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  return float_of(sign | ((e + 112u) << 23) | (m << 13));
}
// STUB: std::uint16_t fp32_to_fp16(float) { return 0; }
// STUB: float fp16_to_fp32(std::uint16_t) { return 0.0f; }
// END SOLUTION

// ---------------------------------------------------------------------------------------------
// bf16 and tf32: fp32 with fewer fraction bits
// ---------------------------------------------------------------------------------------------

// BEGIN SOLUTION(04.2) bf16 and tf32: fp32 with fewer fraction bits
std::uint16_t fp32_to_bf16(float x) {
  std::uint32_t b = bits_of(x);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;
  // Round to nearest even at bit 16: add just under half (0x7FFF) plus the kept part's lowest
  // bit, so that a tie rounds up exactly when that bit is odd. Subnormals and the carry into the
  // exponent (the largest fp32 becomes ∞) come out right with no special case.
  b += 0x7FFFu + ((b >> 16) & 1u);
  return static_cast<std::uint16_t>(b >> 16);
}

float bf16_to_fp32(std::uint16_t b) { return float_of(static_cast<std::uint32_t>(b) << 16); }

float fp32_to_tf32(float x) {
  std::uint32_t b = bits_of(x);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return x;
  b += 0xFFFu + ((b >> 13) & 1u);  // the same trick at bit 13
  return float_of(b & 0xFFFFE000u);
}
// STUB: std::uint16_t fp32_to_bf16(float) { return 0; }
// STUB: float bf16_to_fp32(std::uint16_t) { return 0.0f; }
// STUB: float fp32_to_tf32(float x) { return x; }
// END SOLUTION

// ---------------------------------------------------------------------------------------------
// fp8
// ---------------------------------------------------------------------------------------------

// BEGIN SOLUTION(04.3) fp8 E4M3 and E5M2, with and without saturation
namespace {

/// An fp8 format: fraction bits, exponent bias, its largest finite code, and what overflow gives
/// without saturation.
struct Fp8 {
  int fraction_bits, bias;
  std::uint8_t max_finite, overflow;
};
constexpr Fp8 kE4M3{3, 7, 0x7E, 0x7F};  // no ∞: overflow is NaN
constexpr Fp8 kE5M2{2, 15, 0x7B, 0x7C};  // overflow is ∞

std::uint8_t to_fp8(float x, const Fp8& f, Saturation saturation) {
  const std::uint32_t b = bits_of(x);
  const std::uint8_t sign = static_cast<std::uint8_t>((b >> 24) & 0x80u);
  const std::uint32_t a = b & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7F;
  const std::uint8_t overflowed = static_cast<std::uint8_t>(sign | (saturation == Saturation::kFinite ? f.max_finite : f.overflow));
  if (a == 0x7F800000u) return overflowed;
  // |x| / 2^k is exact in double for every power of two used here, and nearbyint rounds it to
  // nearest even (the default rounding mode): RNE without bit tricks.
  const double v = std::fabs(static_cast<double>(x));
  const int min_exponent = 1 - f.bias;  // of the smallest normal
  const int one = 1 << f.fraction_bits;
  unsigned code;
  if (v < std::ldexp(1.0, min_exponent)) {  // subnormal: units of 2^(min_exponent − fraction_bits)
    code = static_cast<unsigned>(std::nearbyint(std::ldexp(v, f.fraction_bits - min_exponent)));  // may round up to the smallest normal
  } else {
    int e;
    (void)std::frexp(v, &e);
    --e;  // v in [2^e, 2^(e+1))
    unsigned q = static_cast<unsigned>(std::nearbyint(std::ldexp(v, f.fraction_bits - e)));  // in [one, 2·one]
    if (q == 2u * static_cast<unsigned>(one)) {
      q = static_cast<unsigned>(one);
      ++e;
    }
    code = (static_cast<unsigned>(e + f.bias) << f.fraction_bits) | (q - static_cast<unsigned>(one));
  }
  if (code > f.max_finite) return overflowed;
  return static_cast<std::uint8_t>(sign | code);
}

float from_fp8(std::uint8_t v, const Fp8& f) {
  const bool negative = (v & 0x80u) != 0;
  const unsigned magnitude = v & 0x7Fu;
  const unsigned e = magnitude >> f.fraction_bits, m = magnitude & ((1u << f.fraction_bits) - 1);
  if (magnitude > f.max_finite) {  // E4M3: 0x7F is NaN; E5M2: 0x7C is ∞, above it NaN
    if (magnitude == f.overflow && f.overflow != 0x7F) return negative ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
    return float_of(kCanonicalNaN);
  }
  const int min_exponent = 1 - f.bias;
  const float value = e == 0 ? std::ldexp(static_cast<float>(m), min_exponent - f.fraction_bits)
                             : std::ldexp(static_cast<float>((1u << f.fraction_bits) | m), static_cast<int>(e) - f.bias - f.fraction_bits);
  return negative ? -value : value;
}

}  // namespace

std::uint8_t fp32_to_e4m3(float x, Saturation saturation) { return to_fp8(x, kE4M3, saturation); }
std::uint8_t fp32_to_e5m2(float x, Saturation saturation) { return to_fp8(x, kE5M2, saturation); }
float e4m3_to_fp32(std::uint8_t v) { return from_fp8(v, kE4M3); }
float e5m2_to_fp32(std::uint8_t v) { return from_fp8(v, kE5M2); }
// STUB: std::uint8_t fp32_to_e4m3(float, Saturation) { return 0; }
// STUB: std::uint8_t fp32_to_e5m2(float, Saturation) { return 0; }
// STUB: float e4m3_to_fp32(std::uint8_t) { return 0.0f; }
// STUB: float e5m2_to_fp32(std::uint8_t) { return 0.0f; }
// END SOLUTION

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

// BEGIN SOLUTION(04.4) A dot product in low precision, and the bound on its error
float dot_product(const float* x, const float* y, int K, Format in, Format acc) {
  float sum = 0.0f;
  for (int i = 0; i < K; ++i) {
    const float product = round_to(x[i], in) * round_to(y[i], in);  // exact: at most 2·11 significant bits
    sum = acc == Format::kFp16 ? round_to(sum + round_to(product, Format::kFp16), Format::kFp16) : sum + product;
  }
  return sum;
}

double dot_error_bound(int K, Format in, Format acc) {
  const double u_in = in == Format::kFp32 ? 0.0 : unit_roundoff(in);
  const double ku = K * unit_roundoff(acc);
  if (ku >= 1.0) return std::numeric_limits<double>::infinity();
  const double gamma = ku / (1.0 - ku);
  // Each product is x(1 + δ₁)·y(1 + δ₂), |δ| ≤ u_in; its term then takes at most K roundings of
  // the accumulation, |θ_K| ≤ γ_K (Higham, Lemma 3.1).
  return (1.0 + u_in) * (1.0 + u_in) * (1.0 + gamma) - 1.0;
}
// STUB: float dot_product(const float*, const float*, int, Format, Format) { return 0.0f; }
// STUB: double dot_error_bound(int, Format, Format) { return 0.0; }
// END SOLUTION

}  // namespace lab04
