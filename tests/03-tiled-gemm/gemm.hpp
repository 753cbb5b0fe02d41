/// @file gemm.hpp
/// @brief Lab 03 — tiled GEMM: the functions you implement in labs/03-tiled-gemm/gemm.cu.
///
/// This header belongs to the tests: do not change it. Every matrix is row-major fp32 in device
/// memory, with no padding between rows: A is M × K (row stride K), B is K × N (row stride N),
/// C is M × N (row stride N). Sizes are anything ≥ 1: 1, primes, K much larger than M and N.
#pragma once

#include <cuda_runtime_api.h>

namespace lab03 {

// ---------------------------------------------------------------------------------------------
// Napkin math of tiling (host code, graded on any machine)
// ---------------------------------------------------------------------------------------------

/// What a grid of BM × BN output tiles does with an M × N × K product.
struct TilePlan {
  long long tiles = 0;        ///< blocks in the grid: ⌈M / BM⌉ · ⌈N / BN⌉
  int waves = 0;              ///< rounds of blocks the GPU runs: ⌈tiles / resident_blocks⌉
  double last_wave_fill = 0;  ///< fraction of the resident slots busy in the last round, in (0, 1]
  double intensity = 0;       ///< FLOP per byte of global-memory loads of one full tile: each
                              ///< block reads BM·K + K·BN floats and does 2·BM·BN·K FLOP
};

/// TODO(03.1): the plan for BM × BN tiles (bm, bn ≥ 1) when `resident_blocks` blocks fit on the
/// GPU at once (SMs × blocks per SM). Intensity is a property of the tile alone (independent of
/// M, N, K and of the edges).
TilePlan plan_tiles(int M, int N, int K, int bm, int bn, int resident_blocks);

// ---------------------------------------------------------------------------------------------
// The SGEMM ladder: C = alpha · A · B + beta · C
// ---------------------------------------------------------------------------------------------

/// The rungs, in the order of lesson 03. v1 is given as a worked example.
enum class Rung {
  kNaive = 1,     ///< v1 (given) one thread per C element; threadIdx.x walks down a column of C
  kCoalesced,     ///< TODO(03.2) one thread per C element; threadIdx.x walks along a row of C
  kSharedTile,    ///< TODO(03.3) 32 × 32 tiles of A and B staged in shared memory
  kRegister1D,    ///< TODO(03.4) each thread computes a column of 8 C elements (1D register blocking)
  kRegister2D,    ///< TODO(03.5) each thread computes 8 × 8 C elements; 128-bit loads (2D blocking)
  kWarpTile,      ///< TODO(03.6, stretch) warp tiles and double-buffered shared memory
};

/// Number of rungs (v1 … v6).
inline constexpr int kRungs = 6;

/// C = alpha · A · B + beta · C by the chosen rung, asynchronously on `stream`. As in BLAS, when
/// beta == 0 C is not read (it may hold NaN). Throws std::invalid_argument when M, N or K < 1.
void sgemm(Rung rung, int M, int N, int K, float alpha, const float* A, const float* B, float beta,
           float* C, cudaStream_t stream = 0);

}  // namespace lab03
