/// @file test_formats.cpp
/// @brief Lab 04 tests on the CPU: the conversions (04.1–04.3) bit for bit against CUDA's own host
/// conversions over every 16-bit and 8-bit value and an fp32 set that covers every exponent,
/// every rounding boundary and random fractions (all 2³² with GPULAB_EXHAUSTIVE=1); the dot
/// product and its error bound (04.4) against a model built on CUDA's fp16 arithmetic and inputs
/// made to reach the bound.
#include <catch2/catch.hpp>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "formats.hpp"
#include "gpulab/random.hpp"
#include "gpulab_test.hpp"

using gpulab::Rng;
using gpulab::testing::check_fact;
using lab04::Format;
using lab04::Saturation;

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

// CUDA's conversions, as bits.
std::uint32_t cuda_fp16(float x) {
  const __half h = __float2half_rn(x);
  std::uint16_t b;
  std::memcpy(&b, &h, sizeof b);
  return b;
}
std::uint32_t cuda_bf16(float x) {
  const __nv_bfloat16 h = __float2bfloat16_rn(x);
  std::uint16_t b;
  std::memcpy(&b, &h, sizeof b);
  return b;
}
__nv_saturation_t cuda_saturation(Saturation s) { return s == Saturation::kFinite ? __NV_SATFINITE : __NV_NOSAT; }
std::uint32_t cuda_e4m3(float x, Saturation s) { return __nv_cvt_float_to_fp8(x, cuda_saturation(s), __NV_E4M3); }
std::uint32_t cuda_e5m2(float x, Saturation s) { return __nv_cvt_float_to_fp8(x, cuda_saturation(s), __NV_E5M2); }
float cuda_fp16_to_fp32(std::uint16_t b) {
  __half_raw r;
  r.x = b;
  return __half2float(__half(r));
}
float cuda_bf16_to_fp32(std::uint16_t b) {
  __nv_bfloat16_raw r;
  r.x = b;
  return __bfloat162float(__nv_bfloat16(r));
}
float cuda_fp8_to_fp32(std::uint8_t v, __nv_fp8_interpretation_t kind) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(v), kind)));
}

/// TF32 with round to nearest even, computed differently from the lab's bit trick: the value
/// scaled so that the kept bits are the integer part, rounded by nearbyint (RNE), scaled back.
float tf32_rne(float x) {
  if (std::isnan(x) || std::isinf(x) || x == 0.0f) return x;
  int e;
  (void)std::frexp(x, &e);                   // |x| in [2^(e−1), 2^e)
  const int keep = std::max(e - 11, -126 - 10);  // the last kept bit's weight (subnormals: 2^-136)
  const double r = std::nearbyint(std::ldexp(static_cast<double>(x), -keep));
  return static_cast<float>(std::ldexp(r, keep));  // 2^128 overflows to ∞ in the cast, as RNE does
}

/// The fp32 inputs every conversion is checked on: both signs, every exponent, and for each the
/// fraction patterns 0, all ones, every single bit and every pair of neighbouring bits with their
/// neighbours (so every halfway point of every narrower format, above an even and above an odd
/// last kept bit, subnormal ones included, with the values one ulp either side), NaNs
/// with payloads, then random fractions.
std::vector<float> fp32_inputs() {
  std::vector<std::uint32_t> bits;
  for (std::uint32_t sign : {0u, 0x80000000u}) {
    for (std::uint32_t e = 0; e < 256; ++e) {
      std::vector<std::uint32_t> fractions = {0, 0x7FFFFFu, 1};
      for (int p = 0; p < 23; ++p) {
        const std::uint32_t bit = 1u << p;
        // bit | bit << 1: the halfway point above a code whose last kept bit is odd (round to even
        // goes up there; rounding ties down is right only where that bit is even).
        for (std::uint32_t f : {bit, bit - 1, bit + 1, bit | 1u << 22, (bit | 1u << 22) + 1, (bit | 1u << 22) - 1, bit | 0x2000u, bit | 0x10000u,
                                bit | bit << 1, (bit | bit << 1) + 1, (bit | bit << 1) - 1})
          fractions.push_back(f & 0x7FFFFFu);
      }
      for (std::uint32_t f : fractions) bits.push_back(sign | e << 23 | f);
    }
  }
  Rng rng = Rng::for_test("lab04 fp32 inputs");
  for (int i = 0; i < (1 << 18); ++i) bits.push_back(static_cast<std::uint32_t>(rng.integer(0, 0xFFFFFFFFLL)));
  std::vector<float> out;
  out.reserve(bits.size());
  for (std::uint32_t b : bits) out.push_back(float_of(b));
  return out;
}

/// Every fp32 when GPULAB_EXHAUSTIVE=1 (minutes: the opt-in case of the issue), else the input set.
bool exhaustive() {
  const char* v = std::getenv("GPULAB_EXHAUSTIVE");
  return v != nullptr && std::string(v) == "1";
}

/// Compares @p mine with @p want on every input, records one fact with the first mismatches.
void check_conversion(const std::string& what, const std::function<std::uint32_t(float)>& mine,
                      const std::function<std::uint32_t(float)>& want, int hex_digits, const std::string& hint,
                      const char* yardstick = "CUDA") {
  std::size_t checked = 0, wrong = 0;
  std::string first;
  auto one = [&](float x) {
    ++checked;
    const std::uint32_t got = mine(x), expected = want(x);
    if (got == expected) return;
    if (++wrong <= 4) {
      char line[160];
      std::snprintf(line, sizeof line, "%s%.9g (0x%08X) gives 0x%0*X, %s 0x%0*X", first.empty() ? "" : "; ", static_cast<double>(x), bits_of(x),
                    hex_digits, got, yardstick, hex_digits, expected);
      first += line;
    }
  };
  if (exhaustive()) {
    for (std::uint64_t b = 0; b <= 0xFFFFFFFFull; ++b) one(float_of(static_cast<std::uint32_t>(b)));
  } else {
    static const std::vector<float> inputs = fp32_inputs();
    for (float x : inputs) one(x);
  }
  check_fact(wrong == 0, what + " (" + std::to_string(checked) + " fp32 inputs" + (exhaustive() ? ": all of them)" : ")"),
             std::to_string(wrong) + " differ: " + first, hint);
}

/// Compares a decoder on every code of @p codes values.
void check_decoder(const std::string& what, int codes, const std::function<float(std::uint32_t)>& mine,
                   const std::function<float(std::uint32_t)>& want, int hex_digits) {
  int wrong = 0;
  std::string first;
  for (int c = 0; c < codes; ++c) {
    const std::uint32_t got = bits_of(mine(static_cast<std::uint32_t>(c))), expected = bits_of(want(static_cast<std::uint32_t>(c)));
    if (got == expected) continue;
    if (++wrong <= 4) {
      char line[160];
      std::snprintf(line, sizeof line, "%s0x%0*X gives 0x%08X (%.9g), CUDA 0x%08X (%.9g)", first.empty() ? "" : "; ", hex_digits, c, got,
                    static_cast<double>(float_of(got)), expected, static_cast<double>(float_of(expected)));
      first += line;
    }
  }
  check_fact(wrong == 0, what + " (all " + std::to_string(codes) + " codes)", std::to_string(wrong) + " differ: " + first,
             "subnormals (exponent field 0) have no implicit 1 and the smallest normal's exponent; NaN gives 0x7FFFFFFF");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// 04.1–04.3: the formats
// ---------------------------------------------------------------------------------------------

TEST_CASE("the test's tf32 model agrees with hand-worked roundings", "[cpu]") {
  // 1 + 2⁻¹¹ is halfway between 1 and 1 + 2⁻¹⁰: to even, 1. 1 + 3·2⁻¹¹ is halfway between
  // 1 + 2⁻¹⁰ (odd) and 1 + 2⁻⁹: up. The largest fp32 rounds to ∞; 2⁻¹⁴⁹ (a subnormal) to 0.
  const bool ok = tf32_rne(1.0f + 0x1p-11f) == 1.0f && tf32_rne(1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f &&
                  std::isinf(tf32_rne(std::numeric_limits<float>::max())) && tf32_rne(0x1p-149f) == 0.0f &&
                  tf32_rne(-(1.0f + 0x1p-12f)) == -1.0f;
  check_fact(ok, "tf32 yardstick: ties to even, overflow to infinity, subnormals", "the test's own model is wrong");
}

TEST_CASE("fp16: every half converts back as CUDA's __half2float does", "[cpu][04.1]") {
  check_decoder("fp16 -> fp32", 1 << 16, [](std::uint32_t c) { return lab04::fp16_to_fp32(static_cast<std::uint16_t>(c)); },
                [](std::uint32_t c) { return cuda_fp16_to_fp32(static_cast<std::uint16_t>(c)); }, 4);
}

TEST_CASE("fp16: fp32 rounds as CUDA's __float2half_rn does", "[cpu][04.1]") {
  check_conversion("fp32 -> fp16", [](float x) { return static_cast<std::uint32_t>(lab04::fp32_to_fp16(x)); }, cuda_fp16, 4,
                   "round the 13 dropped bits to nearest, ties to even; from 65520 up it is infinity; below 2^-14 count in units of "
                   "2^-24 (subnormals); every NaN is 0x7FFF");
}

TEST_CASE("bf16: every bf16 converts back as CUDA's __bfloat162float does", "[cpu][04.2]") {
  check_decoder("bf16 -> fp32", 1 << 16, [](std::uint32_t c) { return lab04::bf16_to_fp32(static_cast<std::uint16_t>(c)); },
                [](std::uint32_t c) { return cuda_bf16_to_fp32(static_cast<std::uint16_t>(c)); }, 4);
}

TEST_CASE("bf16: fp32 rounds as CUDA's __float2bfloat16_rn does", "[cpu][04.2]") {
  check_conversion("fp32 -> bf16", [](float x) { return static_cast<std::uint32_t>(lab04::fp32_to_bf16(x)); }, cuda_bf16, 4,
                   "truncating the low 16 bits is round toward zero: add 0x7FFF plus the lowest kept bit first; every NaN is 0x7FFF");
}

TEST_CASE("tf32: fp32 rounds to nearest even at 10 fraction bits", "[cpu][04.2]") {
  check_conversion("fp32 -> tf32",
                   [](float x) {
                     const float t = lab04::fp32_to_tf32(x);
                     return std::isnan(t) ? 0x7FC00000u : bits_of(t);  // any NaN is right for a NaN
                   },
                   [](float x) { return std::isnan(x) ? 0x7FC00000u : bits_of(tf32_rne(x)); }, 8,
                   "keep the exponent and the top 10 fraction bits, round the 13 dropped bits to nearest even (not away from zero as "
                   "cvt.rna.tf32 does), clear them; NaN stays NaN",
                   "round to nearest even");
}

TEST_CASE("fp8: every E4M3 and E5M2 code converts back as CUDA's does", "[cpu][04.3]") {
  check_decoder("E4M3 -> fp32", 256, [](std::uint32_t c) { return lab04::e4m3_to_fp32(static_cast<std::uint8_t>(c)); },
                [](std::uint32_t c) { return cuda_fp8_to_fp32(static_cast<std::uint8_t>(c), __NV_E4M3); }, 2);
  check_decoder("E5M2 -> fp32", 256, [](std::uint32_t c) { return lab04::e5m2_to_fp32(static_cast<std::uint8_t>(c)); },
                [](std::uint32_t c) { return cuda_fp8_to_fp32(static_cast<std::uint8_t>(c), __NV_E5M2); }, 2);
}

TEST_CASE("fp8: fp32 rounds as CUDA's __nv_cvt_float_to_fp8 does with and without saturation", "[cpu][04.3]") {
  for (Saturation s : {Saturation::kNone, Saturation::kFinite}) {
    const std::string mode = s == Saturation::kNone ? "NOSAT" : "SATFINITE";
    check_conversion("fp32 -> E4M3 " + mode, [s](float x) { return static_cast<std::uint32_t>(lab04::fp32_to_e4m3(x, s)); },
                     [s](float x) { return cuda_e4m3(x, s); }, 2,
                     "E4M3 has no infinity: past 464 (the tie above 448) it is NaN 0x7F|sign, or 0x7E|sign when saturating "
                     "(infinity too); subnormals are m * 2^-9");
    check_conversion("fp32 -> E5M2 " + mode, [s](float x) { return static_cast<std::uint32_t>(lab04::fp32_to_e5m2(x, s)); },
                     [s](float x) { return cuda_e5m2(x, s); }, 2,
                     "E5M2 is fp16's top byte: from 61440 up it is infinity 0x7C|sign, or 0x7B|sign when saturating (infinity "
                     "too); every NaN is 0x7F");
  }
}

// ---------------------------------------------------------------------------------------------
// 04.4: a dot product in low precision, and its error bound
// ---------------------------------------------------------------------------------------------

namespace {

const char* format_name(Format f) {
  switch (f) {
    case Format::kFp32: return "fp32";
    case Format::kFp16: return "fp16";
    case Format::kBf16: return "bf16";
    case Format::kTf32: return "tf32";
  }
  return "?";
}

/// The test's model of the matrix unit's dot product, on CUDA's conversions and fp16 arithmetic.
float model_dot(const std::vector<float>& x, const std::vector<float>& y, Format in, Format acc) {
  auto round_in = [in](float v) {
    switch (in) {
      case Format::kFp16: return __half2float(__float2half_rn(v));
      case Format::kBf16: return __bfloat162float(__float2bfloat16_rn(v));
      case Format::kTf32: return tf32_rne(v);
      case Format::kFp32: return v;
    }
    return v;
  };
  if (acc == Format::kFp16) {
    __half sum = __float2half_rn(0.0f);
    for (std::size_t i = 0; i < x.size(); ++i) sum = __hadd(sum, __float2half_rn(round_in(x[i]) * round_in(y[i])));
    return __half2float(sum);
  }
  float sum = 0.0f;
  for (std::size_t i = 0; i < x.size(); ++i) sum += round_in(x[i]) * round_in(y[i]);
  return sum;
}

/// |computed − Σxᵢyᵢ| / Σ|xᵢyᵢ|, the sums in long double.
double relative_error(float computed, const std::vector<float>& x, const std::vector<float>& y) {
  long double exact = 0, magnitude = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    exact += static_cast<long double>(x[i]) * y[i];
    magnitude += std::fabs(static_cast<long double>(x[i]) * y[i]);
  }
  return magnitude == 0 ? 0.0 : static_cast<double>(std::fabs(computed - exact) / magnitude);
}

int significand_bits(Format f) {
  switch (f) {
    case Format::kFp32: return 24;
    case Format::kBf16: return 8;
    default: return 11;
  }
}

/// Inputs built to reach the bound: x₀ = y₀ = s(1 + u_in − tiny), which rounds *down* to s in the
/// input format, then K − 1 terms h·1, h the largest input value below half an ulp of s² in the
/// accumulator, so that every addition leaves s² unchanged (stagnation). Both errors have the
/// same sign and add: ≈ 2u_in + (K − 1)·u_acc of Σ|xᵢyᵢ|.
void adversarial(int K, Format in, Format acc, std::vector<float>& x, std::vector<float>& y) {
  const double u_acc = lab04::unit_roundoff(acc);
  // s = 2⁵ for fp16 inputs summed in fp32, so that h ≈ 2⁻¹⁴ is an fp16 normal; else 1.
  const double s = in == Format::kFp16 && acc == Format::kFp32 ? 32.0 : 1.0;
  const double below_tie = in == Format::kFp32 ? 1.0 : 1.0 + lab04::unit_roundoff(in) - std::ldexp(1.0, -20);
  const double h = u_acc * s * s * (1.0 - std::ldexp(1.0, -significand_bits(in) + 1));
  x.assign(static_cast<std::size_t>(K), static_cast<float>(h));
  y.assign(static_cast<std::size_t>(K), 1.0f);
  x[0] = y[0] = static_cast<float>(s * below_tie);
}

struct Combo {
  Format in, acc;
};
const Combo kCombos[] = {{Format::kFp32, Format::kFp32},
                         {Format::kFp16, Format::kFp32},
                         {Format::kBf16, Format::kFp32},
                         {Format::kTf32, Format::kFp32},
                         {Format::kFp16, Format::kFp16}};

}  // namespace

TEST_CASE("dot_product computes as the matrix unit does bit for bit", "[cpu][04.4]") {
  Rng rng = Rng::for_test("lab04 dot");
  int wrong = 0;
  std::string first;
  for (const Combo& c : kCombos) {
    for (int K : {1, 2, 16, 100, 777, 4096}) {
      for (int trial = 0; trial < 4; ++trial) {
        const std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(K), -1.0f, 1.0f),
                                 y = rng.uniform_vector(static_cast<std::size_t>(K), trial % 2 ? 0.0f : -1.0f, 1.0f);
        const float got = lab04::dot_product(x.data(), y.data(), K, c.in, c.acc), want = model_dot(x, y, c.in, c.acc);
        if (bits_of(got) == bits_of(want)) continue;
        if (++wrong <= 3) {
          char line[200];
          std::snprintf(line, sizeof line, "%s%s inputs, %s sums, K = %d: %.9g, want %.9g", first.empty() ? "" : "; ", format_name(c.in),
                        format_name(c.acc), K, static_cast<double>(got), static_cast<double>(want));
          first += line;
        }
      }
    }
  }
  check_fact(wrong == 0, "dot_product: 5 format pairs x 6 lengths x 4 random vectors against CUDA's conversions and __hadd",
             std::to_string(wrong) + " differ: " + first,
             "round each input with round_to, multiply in fp32 (exact), add from 0 in order; for fp16 sums round the product and "
             "every partial sum to fp16");
  // CS336's example (lecture 2): 0.01 added 1000 times. fp32 is close to 10; fp16 sums drift:
  // past 8 fp16's spacing is 2⁻⁷ ≈ 0.0078, so every addition of 0.01 rounds to a whole spacing.
  const std::vector<float> hundredth(1000, 0.01f), ones(1000, 1.0f);
  const float fp32 = lab04::dot_product(hundredth.data(), ones.data(), 1000, Format::kFp32, Format::kFp32);
  const float fp16 = lab04::dot_product(hundredth.data(), ones.data(), 1000, Format::kFp16, Format::kFp16);
  const float mixed = lab04::dot_product(hundredth.data(), ones.data(), 1000, Format::kFp16, Format::kFp32);
  char detail[200];
  std::snprintf(detail, sizeof detail, "fp32 %.7f, fp16 sums %.7f (want %.7f), fp16 inputs with fp32 sums %.7f (want %.7f)", fp32, fp16,
                model_dot(hundredth, ones, Format::kFp16, Format::kFp16), mixed, model_dot(hundredth, ones, Format::kFp16, Format::kFp32));
  check_fact(fp16 == model_dot(hundredth, ones, Format::kFp16, Format::kFp16) && mixed == model_dot(hundredth, ones, Format::kFp16, Format::kFp32) &&
                 std::fabs(fp32 - 10.0f) < 1e-3f && std::fabs(fp16 - 10.0f) > 0.01f,
             "0.01 summed 1000 times in fp32, in fp16, and fp16 inputs with fp32 sums (CS336)", detail);
}

TEST_CASE("dot_error_bound holds on random and adversarial inputs and is within 1.5x of what they reach", "[cpu][04.4]") {
  Rng rng = Rng::for_test("lab04 bound");
  for (const Combo& c : kCombos) {
    for (int K : {16, 100, 1000, 4096}) {
      const double ku = K * lab04::unit_roundoff(c.acc), bound = lab04::dot_error_bound(K, c.in, c.acc);
      char what[160];
      std::snprintf(what, sizeof what, "bound for %s inputs, %s sums, K = %d", format_name(c.in), format_name(c.acc), K);
      if (ku >= 1.0) {
        check_fact(std::isinf(bound) && bound > 0, what, "K*u >= 1: the bound says nothing there and must be +infinity, not " + std::to_string(bound));
        continue;
      }
      double worst_random = 0.0;
      for (int trial = 0; trial < 20; ++trial) {
        const std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(K), trial % 2 ? 0.0f : -1.0f, 1.0f),
                                 y = rng.uniform_vector(static_cast<std::size_t>(K), trial % 2 ? 0.0f : -1.0f, 1.0f);
        worst_random = std::max(worst_random, relative_error(model_dot(x, y, c.in, c.acc), x, y));
      }
      std::vector<float> x, y;
      adversarial(K, c.in, c.acc, x, y);
      const double reached = relative_error(model_dot(x, y, c.in, c.acc), x, y);
      char detail[240];
      std::snprintf(detail, sizeof detail, "bound %.4g; worst of 20 random inputs %.4g; adversarial inputs reach %.4g (bound / reached = %.2f)",
                    bound, worst_random, reached, bound / reached);
      const bool tight = ku > 0.1 || bound <= 1.5 * reached;  // (1 + Ku)/(1 − Ku) ≤ 1.22 keeps the rule fair for Ku ≤ 0.1
      check_fact(bound >= worst_random && bound >= reached && tight, what, detail,
                 "(1 + u_in)^2 (1 + gamma_K) - 1 with gamma_K = K u_acc / (1 - K u_acc): both the inputs' rounding and the sum's");
    }
  }
}
