// The CPU emulator's stand-in for <cuda_fp16.h>: the part of __half that lab 04's kernels and
// tests use, on the host compiler's _Float16 (IEEE binary16; its conversions round to nearest
// even, as __float2half_rn does). Not CUDA's header: the formats lab is graded against the real
// one, natively; this only lets the emulated kernels move and multiply halves.
#pragma once
#include <cstring>

#include "../emu.hpp"

namespace emu {

/// binary16 bits to float: exact (every half is a float), bit for bit what a cast of _Float16
/// gives, NaNs quieted as the hardware does, without the library call that cast costs where the
/// CPU lacks F16C code (GCC calls libgcc's __extendhfsf2: 40 % of an emulated tensor-core GEMM).
inline float half_bits_to_float(unsigned short h) {
  const unsigned sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  unsigned bits;
  if (exponent == 0x1Fu) {
    bits = sign | 0x7F800000u | (mantissa << 13) | (mantissa != 0 ? 0x00400000u : 0u);  // inf; NaN, quiet
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);  // bias 15 -> 127
  } else {
    const float subnormal = static_cast<float>(mantissa) * 0x1p-24f;  // 0 or m * 2^-24, exact
    std::memcpy(&bits, &subnormal, 4);
    bits |= sign;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace emu

struct __half_raw {
  unsigned short x;
};

struct __half {
  unsigned short __x;
  __half() = default;
  __half(float f) {  // NOLINT: CUDA's __half converts implicitly too
    const _Float16 h = static_cast<_Float16>(f);
    std::memcpy(&__x, &h, 2);
  }
  __half(__half_raw r) : __x(r.x) {}
  operator float() const { return emu::half_bits_to_float(__x); }
  operator __half_raw() const { return {__x}; }
};
using half = __half;

struct alignas(4) __half2 {
  __half x, y;
};
using half2 = __half2;

inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __half2float(__half h) { return static_cast<float>(h); }
inline __half __ushort_as_half(unsigned short v) { return __half(__half_raw{v}); }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half2 __halves2half2(__half a, __half b) { return {a, b}; }
inline __half2 __floats2half2_rn(float a, float b) { return {__half(a), __half(b)}; }
inline __half2 __float2half2_rn(float a) { return {__half(a), __half(a)}; }
inline __half __low2half(__half2 v) { return v.x; }
inline __half __high2half(__half2 v) { return v.y; }
inline float __low2float(__half2 v) { return static_cast<float>(v.x); }
inline float __high2float(__half2 v) { return static_cast<float>(v.y); }
// One rounding each: the fp32 result of a sum or product of two halves is exact or correctly
// rounded, and rounding it again to fp16 gives the correctly rounded fp16 result (24 ≥ 2·11 + 2).
inline __half __hadd(__half a, __half b) { return __half(static_cast<float>(a) + static_cast<float>(b)); }
inline __half __hsub(__half a, __half b) { return __half(static_cast<float>(a) - static_cast<float>(b)); }
inline __half __hmul(__half a, __half b) { return __half(static_cast<float>(a) * static_cast<float>(b)); }
inline __half __hfma(__half a, __half b, __half c) {  // a·b + c is exact in double: one rounding, to fp16
  const _Float16 h = static_cast<_Float16>(static_cast<double>(a) * static_cast<double>(b) + static_cast<double>(c));
  __half r;
  std::memcpy(&r.__x, &h, 2);
  return r;
}
inline bool __hisnan(__half h) { return (h.__x & 0x7C00u) == 0x7C00u && (h.__x & 0x03FFu) != 0; }
inline int __hisinf(__half h) { return (h.__x & 0x7FFFu) == 0x7C00u ? ((h.__x & 0x8000u) ? -1 : 1) : 0; }
