/// @file tensor_core.cuh
/// @brief Lab 04 — thin wrappers for the PTX instructions of the HGEMM ladder (ldmatrix,
/// mma.sync m16n8k16, cp.async), so that your kernels think in tiles and fragments, not asm.
///
/// This header belongs to the tests: do not change it. Each wrapper is one instruction; lesson 04
/// shows the asm inside it. mma.m16n8k16 (f16) and cp.async need sm_80 or newer
/// (ldmatrix exists on sm_75, but the rungs using it need the other two): compiled for an older
/// architecture all of them trap. Without a GPU, the CPU emulator runs its
/// own versions (tools/emulator/emu_tensor.hpp), which follow the PTX ISA's fragment layouts, so
/// your indexing is checked there too.
///
/// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16"), lane l, g = l / 4, t = l % 4;
/// each 32-bit register holds two halves, the lower-indexed one in the low 16 bits:
///   A (16 × 16, row-major): a[0] = A[g][2t, 2t+1],   a[1] = A[g+8][2t, 2t+1],
///                           a[2] = A[g][2t+8, 2t+9], a[3] = A[g+8][2t+8, 2t+9]
///   B (16 × 8, "col"):      b[0] = B[2t, 2t+1][g],   b[1] = B[2t+8, 2t+9][g]
///   C, D (16 × 8, fp32):    c[0], c[1] = C[g][2t, 2t+1], c[2], c[3] = C[g+8][2t, 2t+1]
#pragma once

#include <cstdint>

#if defined(GPULAB_EMULATOR)
#include "emu_tensor.hpp"
#else
#include <cuda_runtime.h>
#endif

namespace lab04 {

#if defined(GPULAB_EMULATOR)

inline void ldmatrix_x4(std::uint32_t r[4], const void* row) { emu::ldmatrix(r, 4, false, row); }
inline void ldmatrix_x4_trans(std::uint32_t r[4], const void* row) { emu::ldmatrix(r, 4, true, row); }
inline void mma_m16n8k16(float d[4], const std::uint32_t a[4], const std::uint32_t b[2], const float c[4]) { emu::mma_m16n8k16(d, a, b, c); }
inline void cp_async_16(void* smem, const void* global, bool valid) { emu::cp_async(smem, global, 16, valid ? 16 : 0); }
inline void cp_async_commit() { emu::cp_async_commit(); }
template <int N>
inline void cp_async_wait() {
  emu::cp_async_wait(N);
}

#else

// Below sm_80 each wrapper compiles to a trap (rung_supported() keeps the host from launching a
// kernel that uses them there).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define GPULAB_LAB04_SM80 1
#else
#define GPULAB_LAB04_SM80 0
#endif

/// ldmatrix.sync.aligned.m8n8.x4.shared.b16: four 8 × 8 matrices of halves from shared memory.
/// Lanes 8j … 8j+7 give the addresses of matrix j's 8 rows (16 bytes each, 16-byte aligned); lane
/// l receives in r[j] row l / 4, columns 2(l % 4) and 2(l % 4) + 1, of matrix j — mma's pattern,
/// so the right row addresses (TODO 04.8 derives them) deliver an A fragment whole.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t r[4], const void* row) {
#if GPULAB_LAB04_SM80
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#else
  __trap();
#endif
}

/// The same with .trans: lane l receives rows 2(l % 4) and 2(l % 4) + 1, column l / 4, of matrix
/// j — from a row-major K × N tile of B, mma's B pattern ("col").
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t r[4], const void* row) {
#if GPULAB_LAB04_SM80
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#else
  __trap();
#endif
}

/// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32: d = A · B + c for the warp's 16 × 8 tile
/// (fragment layouts in the file comment). d may be c.
__device__ __forceinline__ void mma_m16n8k16(float d[4], const std::uint32_t a[4], const std::uint32_t b[2], const float c[4]) {
#if GPULAB_LAB04_SM80
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#else
  __trap();
#endif
}

/// cp.async.cg.shared.global [smem], [global], 16, src_bytes: starts copying 16 bytes (both
/// addresses 16-byte aligned) from global to shared memory without passing through registers,
/// bypassing L1. With @p valid false it reads nothing and writes 16 zero bytes (the zero fill
/// for tiles past the edge; @p global must still be a valid address, e.g. the matrix's start).
__device__ __forceinline__ void cp_async_16(void* smem, const void* global, bool valid) {
#if GPULAB_LAB04_SM80
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global), "r"(valid ? 16 : 0) : "memory");
#else
  __trap();
#endif
}

/// cp.async.commit_group: the copies this thread issued since its last commit become one group.
__device__ __forceinline__ void cp_async_commit() {
#if GPULAB_LAB04_SM80
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#else
  __trap();
#endif
}

/// cp.async.wait_group N: waits until at most N of this thread's committed groups (the newest)
/// are still in flight. Other threads' copies need a __syncthreads() after it to be visible.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if GPULAB_LAB04_SM80
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");  // "memory": later plain loads stay after it
#else
  __trap();
#endif
}

#undef GPULAB_LAB04_SM80

#endif

}  // namespace lab04
