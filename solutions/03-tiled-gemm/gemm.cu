/// @file gemm.cu
/// @brief Lab 03 — tiled GEMM: the napkin math of tiles, and a ladder of fp32 SGEMM kernels
/// from one thread per element to warp tiles. Read lessons/03-tiled-gemm.md first.
///
/// Napkin math at M = N = K = 4096: 2·M·N·K = 137 GFLOP against 3 · 64 MiB of matrices. Read once
/// each, the bytes take 0.05 ms on an H200 and the FLOPs 2 ms at its ~67 TFLOP/s fp32 peak: GEMM
/// is compute-bound *if* each element loaded is reused many times. Every rung below raises that
/// reuse: v1/v2 load 2 floats per FMA from global memory (L1/L2 catch most), v3 loads each
/// element once per 32-wide tile, v4 reuses a B value across 8 rows in registers, v5/v6 reuse
/// every loaded register 8 times in each direction.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "gemm.hpp"
#include "gpulab/check.hpp"

namespace lab03 {

// ---------------------------------------------------------------------------------------------
// Napkin math (host code)
// ---------------------------------------------------------------------------------------------

TilePlan plan_tiles(int M, int N, int K, int bm, int bn, int resident_blocks) {
  if (M < 1 || N < 1 || K < 1 || bm < 1 || bn < 1 || resident_blocks < 1) {
    throw std::invalid_argument("plan_tiles: every size must be at least 1");
  }
  TilePlan plan;
  // BEGIN SOLUTION(03.1) Tiles, waves, the last wave's fill, and the tile's arithmetic intensity
  const long long tiles_m = (M + static_cast<long long>(bm) - 1) / bm;
  const long long tiles_n = (N + static_cast<long long>(bn) - 1) / bn;
  plan.tiles = tiles_m * tiles_n;
  plan.waves = static_cast<int>((plan.tiles + resident_blocks - 1) / resident_blocks);
  const long long in_last = plan.tiles - static_cast<long long>(plan.waves - 1) * resident_blocks;
  plan.last_wave_fill = static_cast<double>(in_last) / resident_blocks;
  // One tile: 2·bm·bn·K FLOP over 4·(bm + bn)·K bytes; K cancels.
  plan.intensity = 2.0 * bm * bn / (4.0 * (static_cast<double>(bm) + bn));
  // END SOLUTION
  return plan;
}

// ---------------------------------------------------------------------------------------------
// Helpers for the tiled rungs (given). Out-of-range elements load as 0, so a partial tile at the
// edge of A or B adds nothing; out-of-range elements of C are not stored.
// ---------------------------------------------------------------------------------------------

/// Element (row, col) of a rows × cols row-major matrix, or 0 outside it.
__device__ __forceinline__ float load_or_zero(const float* __restrict__ m, int rows, int cols, int row, int col) {
  return row < rows && col < cols ? m[static_cast<std::size_t>(row) * cols + col] : 0.0f;
}

/// Elements (row, col … col + 3), zero outside the matrix: one 128-bit load when `vec` (cols is a
/// multiple of 4 and the base is 16-byte aligned, so the address is too) and all four are inside.
__device__ __forceinline__ float4 load4_or_zero(const float* __restrict__ m, int rows, int cols, int row, int col,
                                                bool vec) {
  if (vec && row < rows && col + 3 < cols) {
    return *reinterpret_cast<const float4*>(m + static_cast<std::size_t>(row) * cols + col);
  }
  return make_float4(load_or_zero(m, rows, cols, row, col), load_or_zero(m, rows, cols, row, col + 1),
                     load_or_zero(m, rows, cols, row, col + 2), load_or_zero(m, rows, cols, row, col + 3));
}

/// C(row, col) = alpha · acc + beta · C(row, col), if inside C; C is not read when beta == 0.
__device__ __forceinline__ void store_c(float* __restrict__ c, int rows, int cols, int row, int col, float acc,
                                        float alpha, float beta) {
  if (row >= rows || col >= cols) return;
  float& out = c[static_cast<std::size_t>(row) * cols + col];
  out = beta == 0.0f ? alpha * acc : alpha * acc + beta * out;
}

/// store_c for (row, col … col + 3): one 128-bit access each way when `vec` and all four are inside.
__device__ __forceinline__ void store4_c(float* __restrict__ c, int rows, int cols, int row, int col, float4 acc,
                                         float alpha, float beta, bool vec) {
  if (vec && row < rows && col + 3 < cols) {
    float4* p = reinterpret_cast<float4*>(c + static_cast<std::size_t>(row) * cols + col);
    float4 out = make_float4(alpha * acc.x, alpha * acc.y, alpha * acc.z, alpha * acc.w);
    if (beta != 0.0f) {
      const float4 old = *p;
      out.x += beta * old.x;
      out.y += beta * old.y;
      out.z += beta * old.z;
      out.w += beta * old.w;
    }
    *p = out;
    return;
  }
  store_c(c, rows, cols, row, col, acc.x, alpha, beta);
  store_c(c, rows, cols, row, col + 1, acc.y, alpha, beta);
  store_c(c, rows, cols, row, col + 2, acc.z, alpha, beta);
  store_c(c, rows, cols, row, col + 3, acc.w, alpha, beta);
}

// ---------------------------------------------------------------------------------------------
// v1 (given, the worked example): one thread per element of C, threadIdx.x down a column.
// ---------------------------------------------------------------------------------------------

constexpr int kSimpleBlock = 32;  // v1 and v2: 32 × 32 threads, one C element each

__global__ void sgemm_naive_kernel(int M, int N, int K, float alpha, const float* __restrict__ A,
                                   const float* __restrict__ B, float beta, float* __restrict__ C) {
  // Consecutive threads of a warp take consecutive *rows* of C: at each k they read A a whole
  // row (K floats) apart — 32 sectors for 32 useful floats — and write C N floats apart.
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  const int col = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[static_cast<std::size_t>(row) * K + k] * B[static_cast<std::size_t>(k) * N + col];
  store_c(C, M, N, row, col, acc, alpha, beta);
}

// ---------------------------------------------------------------------------------------------
// v2: coalesced. Same work per thread; the warp runs along a row of C instead.
// ---------------------------------------------------------------------------------------------

__global__ void sgemm_coalesced_kernel(int M, int N, int K, float alpha, const float* __restrict__ A,
                                       const float* __restrict__ B, float beta, float* __restrict__ C) {
  // BEGIN SOLUTION(03.2) Coalesced: threadIdx.x along a row of C, so B and C accesses coalesce
  // Lanes share `row`: A[row][k] is one broadcast, B[k][col…col+31] one 128-byte line, and the
  // stores to C are contiguous.
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[static_cast<std::size_t>(row) * K + k] * B[static_cast<std::size_t>(k) * N + col];
  store_c(C, M, N, row, col, acc, alpha, beta);
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// v3: shared-memory tiles. 32 × 32 threads; each step stages a 32 × 32 tile of A and of B.
// ---------------------------------------------------------------------------------------------

constexpr int kTile3 = 32;

__global__ void sgemm_shared_tile_kernel(int M, int N, int K, float alpha, const float* __restrict__ A,
                                         const float* __restrict__ B, float beta, float* __restrict__ C) {
  // BEGIN SOLUTION(03.3) Shared-memory tiling: stage 32 × 32 tiles of A and B, sync, multiply, sync
  __shared__ float As[kTile3][kTile3];
  __shared__ float Bs[kTile3][kTile3];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * kTile3 + ty;
  const int col = blockIdx.x * kTile3 + tx;
  float acc = 0.0f;
  // Each element of the tiles is loaded once from global memory and read 32 times from shared
  // memory. The last step may be partial: out-of-range elements load as 0 and add nothing.
  for (int k0 = 0; k0 < K; k0 += kTile3) {
    As[ty][tx] = load_or_zero(A, M, K, row, k0 + tx);
    Bs[ty][tx] = load_or_zero(B, K, N, k0 + ty, col);
    __syncthreads();  // both tiles complete before anyone reads them
    // As[ty][k]: one word for the whole warp (a broadcast); Bs[k][tx]: 32 consecutive words.
#pragma unroll
    for (int k = 0; k < kTile3; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();  // everyone is done reading before the next step overwrites the tiles
  }
  store_c(C, M, N, row, col, acc, alpha, beta);
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// v4: 1D register blocking. A 64 × 64 tile per block of 512 threads; each thread a column of 8.
// ---------------------------------------------------------------------------------------------

constexpr int kBM4 = 64, kBN4 = 64, kBK4 = 8, kTM4 = 8;
constexpr int kThreads4 = kBM4 * kBN4 / kTM4;  // 512
static_assert(kBM4 * kBK4 == kThreads4 && kBK4 * kBN4 == kThreads4, "one element of each tile per thread");

__global__ void __launch_bounds__(kThreads4) sgemm_register_1d_kernel(int M, int N, int K, float alpha,
                                                                      const float* __restrict__ A,
                                                                      const float* __restrict__ B, float beta,
                                                                      float* __restrict__ C) {
  // BEGIN SOLUTION(03.4) 1D register blocking: each thread accumulates 8 rows of one column
  __shared__ float As[kBM4][kBK4];
  __shared__ float Bs[kBK4][kBN4];
  const int t = threadIdx.x;
  const int m0 = blockIdx.y * kBM4, n0 = blockIdx.x * kBN4;
  const int col = t % kBN4;         // this thread's column of the tile
  const int row0 = (t / kBN4) * kTM4;  // and its first of kTM4 rows
  float acc[kTM4] = {};
  for (int k0 = 0; k0 < K; k0 += kBK4) {
    // Each thread loads one element of each tile: A's rows are kBK4 floats wide here.
    As[t / kBK4][t % kBK4] = load_or_zero(A, M, K, m0 + t / kBK4, k0 + t % kBK4);
    Bs[t / kBN4][t % kBN4] = load_or_zero(B, K, N, k0 + t / kBN4, n0 + t % kBN4);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kBK4; ++k) {
      const float b = Bs[k][col];  // one shared-memory load, reused kTM4 times from a register
#pragma unroll
      for (int i = 0; i < kTM4; ++i) acc[i] += As[row0 + i][k] * b;  // a broadcast per warp
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kTM4; ++i) store_c(C, M, N, m0 + row0 + i, n0 + col, acc[i], alpha, beta);
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// v5: 2D register blocking with 128-bit loads. A 128 × 128 tile per block of 256 threads; each
// thread an 8 × 8 block of C. A's tile is stored transposed, so a column of it is contiguous.
// ---------------------------------------------------------------------------------------------

constexpr int kBM5 = 128, kBN5 = 128, kBK5 = 8, kTM5 = 8, kTN5 = 8;
constexpr int kThreads5 = kBM5 * kBN5 / (kTM5 * kTN5);  // 256
static_assert(kBM5 * kBK5 == 4 * kThreads5 && kBK5 * kBN5 == 4 * kThreads5, "one float4 of each tile per thread");

__global__ void __launch_bounds__(kThreads5) sgemm_register_2d_kernel(int M, int N, int K, float alpha,
                                                                      const float* __restrict__ A,
                                                                      const float* __restrict__ B, float beta,
                                                                      float* __restrict__ C, bool vec_a, bool vec_b,
                                                                      bool vec_c) {
  // BEGIN SOLUTION(03.5) 2D register blocking: 8 × 8 outputs per thread, float4 loads, A transposed
  __shared__ __align__(16) float As[kBK5][kBM5];  // transposed: As[k][m]
  __shared__ __align__(16) float Bs[kBK5][kBN5];
  const int t = threadIdx.x;
  const int m0 = blockIdx.y * kBM5, n0 = blockIdx.x * kBN5;
  const int ty = t / (kBN5 / kTN5), tx = t % (kBN5 / kTN5);  // 16 × 16 threads, 8 × 8 outputs each
  // The loads: A's tile is 128 rows × 2 float4, B's 8 rows × 32 float4.
  const int a_row = t / (kBK5 / 4), a_col = (t % (kBK5 / 4)) * 4;
  const int b_row = t / (kBN5 / 4), b_col = (t % (kBN5 / 4)) * 4;
  float acc[kTM5][kTN5] = {};
  for (int k0 = 0; k0 < K; k0 += kBK5) {
    const float4 a = load4_or_zero(A, M, K, m0 + a_row, k0 + a_col, vec_a);
    As[a_col + 0][a_row] = a.x;
    As[a_col + 1][a_row] = a.y;
    As[a_col + 2][a_row] = a.z;
    As[a_col + 3][a_row] = a.w;
    *reinterpret_cast<float4*>(&Bs[b_row][b_col]) = load4_or_zero(B, K, N, k0 + b_row, n0 + b_col, vec_b);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kBK5; ++k) {
      // 8 values of A's column k and 8 of B's row k into registers (four 128-bit shared loads),
      // then 64 FMAs: each register is used 8 times.
      float a_frag[kTM5], b_frag[kTN5];
#pragma unroll
      for (int i = 0; i < kTM5; i += 4) {
        const float4 v = *reinterpret_cast<const float4*>(&As[k][ty * kTM5 + i]);
        a_frag[i] = v.x, a_frag[i + 1] = v.y, a_frag[i + 2] = v.z, a_frag[i + 3] = v.w;
      }
#pragma unroll
      for (int j = 0; j < kTN5; j += 4) {
        const float4 v = *reinterpret_cast<const float4*>(&Bs[k][tx * kTN5 + j]);
        b_frag[j] = v.x, b_frag[j + 1] = v.y, b_frag[j + 2] = v.z, b_frag[j + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < kTM5; ++i) {
#pragma unroll
        for (int j = 0; j < kTN5; ++j) acc[i][j] += a_frag[i] * b_frag[j];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kTM5; ++i) {
#pragma unroll
    for (int j = 0; j < kTN5; j += 4) {
      store4_c(C, M, N, m0 + ty * kTM5 + i, n0 + tx * kTN5 + j,
               make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]), alpha, beta, vec_c);
    }
  }
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// v6 (stretch): warp tiles and double buffering. A 128 × 128 tile per block of 8 warps; each
// warp owns a 64 × 32 piece, each lane 2 × 2 sub-tiles of 4 × 4. While the block multiplies one
// 16-deep step out of shared memory, the next step's tiles are already on their way from global
// memory into registers, and land in the other half of a double buffer.
// ---------------------------------------------------------------------------------------------

constexpr int kBM6 = 128, kBN6 = 128, kBK6 = 16;
constexpr int kWarpM6 = 64, kWarpN6 = 32;             // a warp's piece of the block tile
constexpr int kWarpsM6 = kBM6 / kWarpM6;              // 2 warps down …
constexpr int kWarpsN6 = kBN6 / kWarpN6;              // … 4 across
constexpr int kThreads6 = 32 * kWarpsM6 * kWarpsN6;   // 256
constexpr int kLanesN6 = 4, kLanesM6 = 32 / kLanesN6;  // lanes within a warp: 8 down, 4 across
constexpr int kSubM6 = kWarpM6 / (kLanesM6 * 4);      // 2 sub-tiles of 4 rows per lane …
constexpr int kSubN6 = kWarpN6 / (kLanesN6 * 4);      // … and 2 of 4 columns
constexpr int kPadA6 = 4;  // A's transposed tile rows padded by one float4 against bank conflicts
constexpr int kLoadsA6 = kBM6 * kBK6 / 4 / kThreads6;  // float4 loads per thread per step: 2 of A
constexpr int kLoadsB6 = kBK6 * kBN6 / 4 / kThreads6;  // and 2 of B
static_assert(kLoadsA6 * 4 * kThreads6 == kBM6 * kBK6 && kLoadsB6 * 4 * kThreads6 == kBK6 * kBN6, "tiles split evenly");
static_assert(kSubM6 * kLanesM6 * 4 == kWarpM6 && kSubN6 * kLanesN6 * 4 == kWarpN6, "lanes cover the warp tile");
static_assert(kPadA6 % 4 == 0, "the padding keeps every row of A's tile 16-byte aligned for float4 reads");

__global__ void __launch_bounds__(kThreads6, 2) sgemm_warp_tile_kernel(int M, int N, int K, float alpha,
                                                                      const float* __restrict__ A,
                                                                      const float* __restrict__ B, float beta,
                                                                      float* __restrict__ C, bool vec_a,
                                                                      bool vec_b, bool vec_c) {
  // BEGIN SOLUTION(03.6) Warp tiling with double-buffered shared memory (stretch)
  __shared__ __align__(16) float As[2][kBK6][kBM6 + kPadA6];  // transposed: As[buf][k][m]
  __shared__ __align__(16) float Bs[2][kBK6][kBN6];
  const int t = threadIdx.x, warp = t / 32, lane = t % 32;
  const int m0 = blockIdx.y * kBM6, n0 = blockIdx.x * kBN6;
  // This lane's place: warp (wm, wn) of the block, lane (lm, ln) of the warp.
  const int wm = (warp / kWarpsN6) * kWarpM6, wn = (warp % kWarpsN6) * kWarpN6;
  const int lm = (lane / kLanesN6) * 4, ln = (lane % kLanesN6) * 4;
  // Global loads: four consecutive lanes read 64 contiguous bytes of a row of A; a warp reads
  // 512 contiguous bytes of a row of B.
  const int a_row = t / (kBK6 / 4), a_col = (t % (kBK6 / 4)) * 4;
  const int b_row = t / (kBN6 / 4), b_col = (t % (kBN6 / 4)) * 4;
  constexpr int kRowsPerLoadA = kThreads6 / (kBK6 / 4), kRowsPerLoadB = kThreads6 / (kBN6 / 4);

  float4 a_next[kLoadsA6], b_next[kLoadsB6];
  auto fetch = [&](int k0) {
#pragma unroll
    for (int i = 0; i < kLoadsA6; ++i) a_next[i] = load4_or_zero(A, M, K, m0 + a_row + i * kRowsPerLoadA, k0 + a_col, vec_a);
#pragma unroll
    for (int i = 0; i < kLoadsB6; ++i) b_next[i] = load4_or_zero(B, K, N, k0 + b_row + i * kRowsPerLoadB, n0 + b_col, vec_b);
  };
  auto stash = [&](int buf) {
#pragma unroll
    for (int i = 0; i < kLoadsA6; ++i) {
      const int m = a_row + i * kRowsPerLoadA;
      As[buf][a_col + 0][m] = a_next[i].x;
      As[buf][a_col + 1][m] = a_next[i].y;
      As[buf][a_col + 2][m] = a_next[i].z;
      As[buf][a_col + 3][m] = a_next[i].w;
    }
#pragma unroll
    for (int i = 0; i < kLoadsB6; ++i) *reinterpret_cast<float4*>(&Bs[buf][b_row + i * kRowsPerLoadB][b_col]) = b_next[i];
  };

  float acc[kSubM6][kSubN6][4][4] = {};
  fetch(0);
  stash(0);
  __syncthreads();
  int buf = 0;
  for (int k0 = 0; k0 < K; k0 += kBK6) {
    const bool more = k0 + kBK6 < K;
    if (more) fetch(k0 + kBK6);  // in flight while we compute: used only after the loop below
#pragma unroll
    for (int k = 0; k < kBK6; ++k) {
      float4 a_frag[kSubM6], b_frag[kSubN6];
      // Lanes with the same lm read the same float4 (a broadcast); 8 distinct float4 of A and 4
      // of B per warp, contiguous: no bank conflicts.
#pragma unroll
      for (int i = 0; i < kSubM6; ++i) a_frag[i] = *reinterpret_cast<const float4*>(&As[buf][k][wm + i * 4 * kLanesM6 + lm]);
#pragma unroll
      for (int j = 0; j < kSubN6; ++j) b_frag[j] = *reinterpret_cast<const float4*>(&Bs[buf][k][wn + j * 4 * kLanesN6 + ln]);
#pragma unroll
      for (int i = 0; i < kSubM6; ++i) {
#pragma unroll
        for (int j = 0; j < kSubN6; ++j) {
          const float a[4] = {a_frag[i].x, a_frag[i].y, a_frag[i].z, a_frag[i].w};
          const float b[4] = {b_frag[j].x, b_frag[j].y, b_frag[j].z, b_frag[j].w};
#pragma unroll
          for (int ii = 0; ii < 4; ++ii) {
#pragma unroll
            for (int jj = 0; jj < 4; ++jj) acc[i][j][ii][jj] += a[ii] * b[jj];
          }
        }
      }
    }
    // The other buffer was last read in the previous step, before the barrier that ended it:
    // filling it now races with no one. One barrier per step publishes it.
    if (more) stash(buf ^ 1);
    __syncthreads();
    buf ^= 1;
  }
#pragma unroll
  for (int i = 0; i < kSubM6; ++i) {
#pragma unroll
    for (int j = 0; j < kSubN6; ++j) {
#pragma unroll
      for (int ii = 0; ii < 4; ++ii) {
        const int row = m0 + wm + i * 4 * kLanesM6 + lm + ii;
        const int col = n0 + wn + j * 4 * kLanesN6 + ln;
        store4_c(C, M, N, row, col, make_float4(acc[i][j][ii][0], acc[i][j][ii][1], acc[i][j][ii][2], acc[i][j][ii][3]),
                 alpha, beta, vec_c);
      }
    }
  }
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// Launchers (given)
// ---------------------------------------------------------------------------------------------

namespace {
unsigned ceil_div(int a, int b) { return static_cast<unsigned>((a + b - 1) / b); }

/// 128-bit accesses to a row-major matrix are aligned when its base is and its rows are a
/// multiple of 4 floats.
bool vectorizable(const void* base, int cols) {
  return reinterpret_cast<std::uintptr_t>(base) % 16 == 0 && cols % 4 == 0;
}
}  // namespace

void sgemm(Rung rung, int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C,
           cudaStream_t stream) {
  if (M < 1 || N < 1 || K < 1) {
    throw std::invalid_argument("sgemm: M, N and K must be at least 1 (got " + std::to_string(M) + ", " +
                                std::to_string(N) + ", " + std::to_string(K) + ")");
  }
  const bool vec_a = vectorizable(A, K), vec_b = vectorizable(B, N), vec_c = vectorizable(C, N);
  switch (rung) {
    case Rung::kNaive:
      sgemm_naive_kernel<<<dim3(ceil_div(M, kSimpleBlock), ceil_div(N, kSimpleBlock)), dim3(kSimpleBlock, kSimpleBlock), 0,
                           stream>>>(M, N, K, alpha, A, B, beta, C);
      break;
    case Rung::kCoalesced:
      sgemm_coalesced_kernel<<<dim3(ceil_div(N, kSimpleBlock), ceil_div(M, kSimpleBlock)),
                               dim3(kSimpleBlock, kSimpleBlock), 0, stream>>>(M, N, K, alpha, A, B, beta, C);
      break;
    case Rung::kSharedTile:
      sgemm_shared_tile_kernel<<<dim3(ceil_div(N, kTile3), ceil_div(M, kTile3)), dim3(kTile3, kTile3), 0, stream>>>(
          M, N, K, alpha, A, B, beta, C);
      break;
    case Rung::kRegister1D:
      sgemm_register_1d_kernel<<<dim3(ceil_div(N, kBN4), ceil_div(M, kBM4)), kThreads4, 0, stream>>>(M, N, K, alpha, A, B,
                                                                                                     beta, C);
      break;
    case Rung::kRegister2D:
      sgemm_register_2d_kernel<<<dim3(ceil_div(N, kBN5), ceil_div(M, kBM5)), kThreads5, 0, stream>>>(
          M, N, K, alpha, A, B, beta, C, vec_a, vec_b, vec_c);
      break;
    case Rung::kWarpTile:
      sgemm_warp_tile_kernel<<<dim3(ceil_div(N, kBN6), ceil_div(M, kBM6)), kThreads6, 0, stream>>>(
          M, N, K, alpha, A, B, beta, C, vec_a, vec_b, vec_c);
      break;
    default:
      throw std::invalid_argument("sgemm: unknown rung " + std::to_string(static_cast<int>(rung)));
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace lab03
