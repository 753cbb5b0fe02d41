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
  // TODO(03.1): Tiles, waves, the last wave's fill, and the tile's arithmetic intensity
  // See lessons/03-tiled-gemm.md, section "TODO(03.1)".
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
  // TODO(03.2): Coalesced: threadIdx.x along a row of C, so B and C accesses coalesce
  // See lessons/03-tiled-gemm.md, section "TODO(03.2)".
}

// ---------------------------------------------------------------------------------------------
// v3: shared-memory tiles. 32 × 32 threads; each step stages a 32 × 32 tile of A and of B.
// ---------------------------------------------------------------------------------------------

constexpr int kTile3 = 32;

__global__ void sgemm_shared_tile_kernel(int M, int N, int K, float alpha, const float* __restrict__ A,
                                         const float* __restrict__ B, float beta, float* __restrict__ C) {
  // TODO(03.3): Shared-memory tiling: stage 32 × 32 tiles of A and B, sync, multiply, sync
  // See lessons/03-tiled-gemm.md, section "TODO(03.3)".
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
  // TODO(03.4): 1D register blocking: each thread accumulates 8 rows of one column
  // See lessons/03-tiled-gemm.md, section "TODO(03.4)".
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
  // TODO(03.5): 2D register blocking: 8 × 8 outputs per thread, float4 loads, A transposed
  // See lessons/03-tiled-gemm.md, section "TODO(03.5)".
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
  // TODO(03.6): Warp tiling with double-buffered shared memory (stretch)
  // See lessons/03-tiled-gemm.md, section "TODO(03.6)".
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
