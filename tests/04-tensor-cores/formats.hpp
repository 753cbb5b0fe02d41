/// @file formats.hpp
/// @brief Lab 04 — the number formats of tensor cores, and the error of a dot product in them: the
/// host functions you implement in labs/04-tensor-cores/formats.cpp (graded on any machine).
///
/// This header belongs to the tests: do not change it. Every conversion from fp32 rounds to
/// nearest, ties to even (RNE), keeps subnormals (no flush to zero) and the sign of zero. The
/// fp16, bf16 and fp8 results are graded bit for bit against CUDA's own host conversions
/// (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h), NaN bits included; tf32 against RNE (lesson 04,
/// "TF32: CUDA rounds ties away").
#pragma once

#include <cstdint>

namespace lab04 {

// ---------------------------------------------------------------------------------------------
// Formats (bits in the low bits of the integer)
// ---------------------------------------------------------------------------------------------

/// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 fraction bits; max 65504, min normal 2⁻¹⁴,
/// min subnormal 2⁻²⁴. Overflow gives ±∞ (0x7C00 | sign); every NaN gives 0x7FFF, as CUDA's
/// __float2half_rn does.
/// TODO(04.1): fp32 → fp16 with RNE.
std::uint16_t fp32_to_fp16(float x);
/// fp16 → fp32, exact; a NaN gives 0x7FFFFFFF (as CUDA's __half2float).
/// TODO(04.1)
float fp16_to_fp32(std::uint16_t h);

/// bfloat16: fp32's top 16 bits (1 sign, 8 exponent, 7 fraction bits), rounded RNE; every NaN
/// gives 0x7FFF (as __float2bfloat16_rn).
/// TODO(04.2)
std::uint16_t fp32_to_bf16(float x);
/// bf16 → fp32: exact, bits << 16 (a NaN keeps its payload, as __bfloat162float).
/// TODO(04.2)
float bf16_to_fp32(std::uint16_t b);
/// TF32 (what tensor cores read from fp32 operands): fp32's exponent and its top 10 fraction
/// bits, RNE; the result as an fp32 whose low 13 fraction bits are zero. ±∞ stays ±∞; a NaN
/// stays a NaN (any NaN bits).
/// TODO(04.2)
float fp32_to_tf32(float x);

/// What to do with a value beyond an fp8 format's largest finite one (CUDA's __nv_saturation_t).
enum class Saturation {
  kNone,    ///< __NV_NOSAT: E4M3 gives NaN (0x7F | sign), E5M2 ±∞ (0x7C | sign)
  kFinite,  ///< __NV_SATFINITE: the largest finite value of the sign (±∞ too): 0x7E / 0x7B | sign
};

/// FP8 E4M3 (OCP, arXiv 2209.05433): 1 sign, 4 exponent (bias 7), 3 fraction bits, no
/// infinities; S.1111.111 is NaN; max 448, min normal 2⁻⁶, min subnormal 2⁻⁹. Every NaN gives 0x7F.
/// TODO(04.3)
std::uint8_t fp32_to_e4m3(float x, Saturation saturation);
/// FP8 E5M2: 1 sign, 5 exponent (bias 15), 2 fraction bits (fp16's top byte); ±∞ is 0x7C | sign;
/// max 57344, min subnormal 2⁻¹⁶. Every NaN gives 0x7F.
/// TODO(04.3)
std::uint8_t fp32_to_e5m2(float x, Saturation saturation);
/// E4M3 → fp32, exact; NaN gives 0x7FFFFFFF (as CUDA's fp8 → half → float).
/// TODO(04.3)
float e4m3_to_fp32(std::uint8_t v);
/// E5M2 → fp32, exact; NaN gives 0x7FFFFFFF.
/// TODO(04.3)
float e5m2_to_fp32(std::uint8_t v);

// ---------------------------------------------------------------------------------------------
// A dot product in low precision, and its error
// ---------------------------------------------------------------------------------------------

/// The formats a tensor core reads or accumulates in.
enum class Format { kFp32, kFp16, kBf16, kTf32 };

/// @p x rounded to @p format by your conversions above, as an fp32 (kFp32: x itself).
float round_to(float x, Format format);
/// The unit roundoff u = 2⁻ᵖ of @p format, p its significand bits: fp32 2⁻²⁴, fp16 and tf32 2⁻¹¹,
/// bf16 2⁻⁸.
double unit_roundoff(Format format);

/// Σ xᵢ·yᵢ over i = 0 … K−1, as a matrix unit computes it: each input rounded to @p in, each
/// product formed exactly in fp32 (an fp16, bf16 or tf32 product fits), then summed from 0 in
/// order i = 0, 1, … in @p acc: kFp32 adds in fp32; kFp16 rounds each product and each partial
/// sum to fp16 (the old fp16-accumulating HGEMM). @p acc is kFp32 or kFp16.
/// TODO(04.4)
float dot_product(const float* x, const float* y, int K, Format in, Format acc);

/// A bound, valid for every input whose values and products stay in @p in's and @p acc's normal
/// ranges, on |dot_product(x, y, K, in, acc) − Σ xᵢyᵢ| / Σ |xᵢyᵢ| (exact sums of the unrounded
/// inputs): the input rounding (1 + u_in)² times K roundings of the accumulation, γ_K =
/// K·u/(1 − K·u) (Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1). +∞ when
/// K·u_acc ≥ 1, where the bound says nothing. It must hold, and not be loose: inputs built to
/// reach it come within a factor of 1.5.
/// TODO(04.4)
double dot_error_bound(int K, Format in, Format acc);

}  // namespace lab04
