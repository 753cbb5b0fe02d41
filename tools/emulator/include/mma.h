// The CPU emulator's stand-in for <mma.h>: nvcuda::wmma for 16 × 16 × 16 tiles of __half with a
// float accumulator (lab 04's v1 and v2), on the emulator's warp-wide exchange.
//
// CUDA leaves a fragment's layout (which lane holds which element in x[]) unspecified, so here
// each kind of fragment has its own fixed scramble of the 256 elements over 32 lanes × 8: code
// that touches x[i] assuming a layout gets wrong values; element-wise code that treats every
// x[i] alike (scaling, fill_fragment) is fine, as CUDA's documentation promises. The rules a GPU
// enforces are checked: ldm a multiple of 8 halves (16 bytes) or 4 floats, and a pointer aligned
// to 32 bytes (256 bits).
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>

#include "../emu_tensor.hpp"
#include "cuda_fp16.h"

namespace nvcuda::wmma {

struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };

namespace detail {
/// Element e of lane l of a fragment of kind @p which ↔ position (row, col) = p / 16, p % 16 of
/// the 16 × 16 tile, p = scramble(which)[l · 8 + e]: a fixed permutation per kind.
inline const std::uint8_t* scramble(int which) {
  static std::uint8_t table[3][256];
  static const bool made = [] {
    for (int w = 0; w < 3; ++w) {
      for (int i = 0; i < 256; ++i) table[w][i] = static_cast<std::uint8_t>(i);
      std::uint32_t state = 0x9E3779B9u * static_cast<std::uint32_t>(w + 1);
      for (int i = 255; i > 0; --i) {  // Fisher–Yates with a small LCG: the same every run
        state = state * 1664525u + 1013904223u;
        const int j = static_cast<int>((state >> 8) % static_cast<std::uint32_t>(i + 1));
        std::swap(table[w][i], table[w][j]);
      }
    }
    return true;
  }();
  (void)made;
  return table[which];
}
inline void check(const void* p, unsigned ldm, unsigned multiple, const char* what) {
  if (ldm % multiple != 0 || reinterpret_cast<std::uintptr_t>(p) % 32 != 0) {
    char text[200];
    std::snprintf(text, sizeof text, "wmma::%s: ldm %u must be a multiple of %u elements and the pointer %p 32-byte aligned", what, ldm,
                  multiple, p);
    emu::fail_here(text);
  }
}
inline unsigned lane() { return emu::linear_thread() % 32; }
}  // namespace detail

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulator's wmma has 16 x 16 x 16 tiles only");
  static constexpr int num_elements = 8;
  T x[8];
};

/// The value's type is not deduced (as in CUDA's own: fill_fragment(acc, 0) compiles).
template <class T>
struct non_deduced {
  using type = T;
};
template <class Use, class T, class Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f, typename non_deduced<T>::type v) {
  for (T& e : f.x) e = v;
}

template <class Layout>
void load_matrix_sync(fragment<matrix_a, 16, 16, 16, __half, Layout>& f, const __half* p, unsigned ldm) {
  detail::check(p, ldm, 8, "load_matrix_sync (matrix_a)");
  const std::uint8_t* s = detail::scramble(0);
  for (int e = 0; e < 8; ++e) {
    const int pos = s[detail::lane() * 8 + e], row = pos / 16, col = pos % 16;  // A is M × K: (row, k)
    f.x[e] = std::is_same<Layout, row_major>::value ? p[row * ldm + col] : p[col * ldm + row];
  }
}

template <class Layout>
void load_matrix_sync(fragment<matrix_b, 16, 16, 16, __half, Layout>& f, const __half* p, unsigned ldm) {
  detail::check(p, ldm, 8, "load_matrix_sync (matrix_b)");
  const std::uint8_t* s = detail::scramble(1);
  for (int e = 0; e < 8; ++e) {
    const int pos = s[detail::lane() * 8 + e], k = pos / 16, col = pos % 16;  // B is K × N: (k, col)
    f.x[e] = std::is_same<Layout, row_major>::value ? p[k * ldm + col] : p[col * ldm + k];
  }
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ldm, layout_t layout) {
  detail::check(p, ldm, 4, "load_matrix_sync (accumulator)");
  const std::uint8_t* s = detail::scramble(2);
  for (int e = 0; e < 8; ++e) {
    const int pos = s[detail::lane() * 8 + e], row = pos / 16, col = pos % 16;
    f.x[e] = layout == mem_row_major ? p[row * ldm + col] : p[col * ldm + row];
  }
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm, layout_t layout) {
  detail::check(p, ldm, 4, "store_matrix_sync");
  const std::uint8_t* s = detail::scramble(2);
  for (int e = 0; e < 8; ++e) {
    const int pos = s[detail::lane() * 8 + e], row = pos / 16, col = pos % 16;
    (layout == mem_row_major ? p[row * ldm + col] : p[col * ldm + row]) = f.x[e];
  }
}

/// D = A · B + C for the warp's 16 × 16 tiles (every lane must call it).
template <class LayoutA, class LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, __half, LayoutA>& a,
              const fragment<matrix_b, 16, 16, 16, __half, LayoutB>& b, const fragment<accumulator, 16, 16, 16, float>& c) {
  struct Lane {
    __half a[8], b[8];
    float c[8];
  };
  Lane mine;
  std::memcpy(mine.a, a.x, sizeof mine.a);
  std::memcpy(mine.b, b.x, sizeof mine.b);
  std::memcpy(mine.c, c.x, sizeof mine.c);
  Lane all[32];
  emu::warp_gather("wmma::mma_sync", &mine, sizeof mine, all);
  float A[256], B[256], C[256];
  const std::uint8_t *sa = detail::scramble(0), *sb = detail::scramble(1), *sc = detail::scramble(2);
  for (int l = 0; l < 32; ++l) {
    for (int e = 0; e < 8; ++e) {
      A[sa[l * 8 + e]] = __half2float(all[l].a[e]);
      B[sb[l * 8 + e]] = __half2float(all[l].b[e]);
      C[sc[l * 8 + e]] = all[l].c[e];
    }
  }
  const unsigned lane = detail::lane();
  for (int e = 0; e < 8; ++e) {
    const int pos = sc[lane * 8 + e], row = pos / 16, col = pos % 16;
    float sum = C[pos];
    for (int k = 0; k < 16; ++k) sum += A[row * 16 + k] * B[k * 16 + col];
    d.x[e] = sum;
  }
}

}  // namespace nvcuda::wmma
