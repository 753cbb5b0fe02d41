/// @file emu_tensor.hpp
/// @brief The emulator's tensor-core and asynchronous-copy instructions, for lab 04's kernels: the
/// PTX wrappers of tests/04-tensor-cores/tensor_core.cuh call these where there is no GPU, and
/// <mma.h> (nvcuda::wmma) is built on them.
///
/// What they check is what a learner gets wrong:
///   - `mma.sync.m16n8k16` and `ldmatrix` place each element in the lane and register the PTX ISA
///     documents ("Matrix fragments for mma.m16n8k16 with floating point type"; "Warp-level matrix
///     load instruction: ldmatrix"), so an index that is off by a row or a lane gives wrong
///     values here, as on a GPU. Both are warp-wide: every lane must take part.
///   - WMMA's fragment layout is *unspecified* by CUDA, so here it is a fixed scramble: code that
///     reads `fragment::x[i]` assuming a layout computes garbage (as it would on the next GPU).
///   - `cp.async` lands nothing until the issuing thread waits for its group: the destination
///     holds NaN (all bits set) from the copy's issue until then, so reading a stage before
///     waiting for the group that fills it shows as NaN in the result.
/// Tensor-core arithmetic is modelled as products exact in fp32 and an fp32 sum in k order; a GPU
/// sums differently (and truncates), which the tests' error bound allows for.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "emu.hpp"
#include "include/cuda_fp16.h"

namespace emu {

/// The two halves of a 32-bit register: the lower 16 bits hold the first (lower-indexed) element.
inline float half_lo(std::uint32_t r) { return __half2float(__ushort_as_half(static_cast<unsigned short>(r & 0xFFFFu))); }
inline float half_hi(std::uint32_t r) { return __half2float(__ushort_as_half(static_cast<unsigned short>(r >> 16))); }

/// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32: D (16 × 8) = A (16 × 16) · B (16 × 8) + C.
/// Lane l, with group g = l / 4 and t = l % 4, holds (PTX ISA fragment tables):
///   A: a[0] = (g, 2t..2t+1), a[1] = (g+8, 2t..2t+1), a[2] = (g, 2t+8..2t+9), a[3] = (g+8, 2t+8..2t+9)
///   B: b[0] = (k = 2t..2t+1, n = g), b[1] = (k = 2t+8..2t+9, n = g)
///   C, D: c[0..1] = (g, 2t..2t+1), c[2..3] = (g+8, 2t..2t+1)
inline void mma_m16n8k16(float d[4], const std::uint32_t a[4], const std::uint32_t b[2], const float c[4]) {
  struct Lane {
    std::uint32_t a[4], b[2];
    float c[4];
  };
  Lane mine;
  std::memcpy(mine.a, a, sizeof mine.a);
  std::memcpy(mine.b, b, sizeof mine.b);
  std::memcpy(mine.c, c, sizeof mine.c);
  Lane all[32];
  warp_gather("mma.sync.m16n8k16", &mine, sizeof mine, all);
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    for (int r = 0; r < 4; ++r) {
      const int row = g + (r % 2) * 8, col = 2 * t + (r / 2) * 8;
      A[row][col] = half_lo(all[l].a[r]);
      A[row][col + 1] = half_hi(all[l].a[r]);
    }
    for (int r = 0; r < 2; ++r) {
      B[2 * t + r * 8][g] = half_lo(all[l].b[r]);
      B[2 * t + r * 8 + 1][g] = half_hi(all[l].b[r]);
    }
  }
  const unsigned lane = linear_thread() % 32;
  const int g = static_cast<int>(lane / 4), t = static_cast<int>(lane % 4);
  for (int i = 0; i < 4; ++i) {
    const int row = g + (i / 2) * 8, col = 2 * t + i % 2;
    float sum = c[i];
    for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
    d[i] = sum;
  }
}

/// ldmatrix.sync.aligned.m8n8.x{count}[.trans].shared.b16: lanes 8j … 8j+7 give the addresses of
/// the 8 rows (16 bytes each, 16-byte aligned) of matrix j; lane l receives in r[j] the elements
/// (l / 4, 2(l % 4)) and (l / 4, 2(l % 4) + 1) of matrix j, or with .trans those of its transpose:
/// (2(l % 4), l / 4) and (2(l % 4) + 1, l / 4). Addresses of lanes past 8·count are ignored.
inline void ldmatrix(std::uint32_t* r, int count, bool trans, const void* row) {
  const void* all[32];
  warp_gather(trans ? "ldmatrix.trans" : "ldmatrix", &row, sizeof row, all);
  for (int l = 0; l < 8 * count; ++l) {
    if (reinterpret_cast<std::uintptr_t>(all[l]) % 16 != 0) {
      char what[160];
      std::snprintf(what, sizeof what, "ldmatrix: lane %d gave a row address that is not 16-byte aligned (%p)", l, all[l]);
      fail_here(what);
    }
  }
  const unsigned lane = linear_thread() % 32;
  for (int j = 0; j < count; ++j) {
    auto element = [&](int row_in_matrix, int col) {
      unsigned short v;
      std::memcpy(&v, static_cast<const unsigned char*>(all[8 * j + row_in_matrix]) + 2 * col, 2);
      return static_cast<std::uint32_t>(v);
    };
    const int q = static_cast<int>(lane / 4), p = static_cast<int>(lane % 4) * 2;
    r[j] = trans ? element(p, q) | element(p + 1, q) << 16 : element(q, p) | element(q, p + 1) << 16;
  }
}

/// One thread's cp.async groups: committed ones in order, and the copies not yet committed.
struct PendingCopy {
  void* dst;
  unsigned char bytes[16];
  int size;
};
struct AsyncCopies {
  unsigned long long block = ~0ull;
  std::vector<std::vector<PendingCopy>> committed;
  std::vector<PendingCopy> open;
};
inline AsyncCopies async_copies[1024];

inline AsyncCopies& my_copies() {
  AsyncCopies& a = async_copies[linear_thread()];
  if (a.block != block_serial) {  // a new block: what an earlier block left pending is gone
    a.block = block_serial;
    a.committed.clear();
    a.open.clear();
  }
  return a;
}

/// cp.async.{ca,cg}.shared.global [dst], [src], size, src_bytes: copies src_bytes (0 … size) from
/// @p src and zeros the rest — later. Until this thread waits for the copy's group, @p dst holds
/// NaN (all bits set). Both addresses must be aligned to @p size (4, 8 or 16).
inline void cp_async(void* dst, const void* src, int size, int src_bytes) {
  if ((size != 4 && size != 8 && size != 16) || src_bytes < 0 || src_bytes > size) {
    fail_here("cp.async: size must be 4, 8 or 16 and the source bytes between 0 and size");
  }
  if (reinterpret_cast<std::uintptr_t>(dst) % size != 0 || (src_bytes > 0 && reinterpret_cast<std::uintptr_t>(src) % size != 0)) {
    char what[200];
    std::snprintf(what, sizeof what, "cp.async of %d bytes from %p to %p: both addresses must be %d-byte aligned", size, src, dst, size);
    fail_here(what);
  }
  PendingCopy c{dst, {}, size};
  if (src_bytes > 0) std::memcpy(c.bytes, src, static_cast<std::size_t>(src_bytes));
  std::memset(static_cast<unsigned char*>(dst), 0xFF, static_cast<std::size_t>(size));
  my_copies().open.push_back(c);
}

/// cp.async.commit_group: the copies issued since the last commit become one group (maybe empty).
inline void cp_async_commit() {
  AsyncCopies& a = my_copies();
  a.committed.push_back(std::move(a.open));
  a.open.clear();
}

/// cp.async.wait_group n: lands every committed group of this thread but the newest @p n.
inline void cp_async_wait(int n) {
  AsyncCopies& a = my_copies();
  while (static_cast<int>(a.committed.size()) > n) {
    for (const PendingCopy& c : a.committed.front()) std::memcpy(c.dst, c.bytes, static_cast<std::size_t>(c.size));
    a.committed.erase(a.committed.begin());
  }
}

/// cp.async.wait_all: commit, then wait for everything.
inline void cp_async_wait_all() {
  cp_async_commit();
  cp_async_wait(0);
}

}  // namespace emu
