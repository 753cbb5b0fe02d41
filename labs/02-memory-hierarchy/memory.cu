/// @file memory.cu
/// @brief Lab 02 — the memory hierarchy: bank arithmetic, the transpose ladder (naive, tiled,
/// padded), the reduction ladder (divergent tree, sequential tree, warp shuffles, grid-stride),
/// histograms with atomics (global, shared). Read lessons/02-memory-hierarchy.md first.
///
/// Napkin math: a transpose reads and writes every element once, 8 bytes per float and no
/// arithmetic; a sum reads 4 bytes per float for one addition; a byte histogram reads 1 byte per
/// atomic increment. All are memory-bound: the grader compares them with cudaMemcpy.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "gpulab/check.hpp"
#include "memory.hpp"

namespace lab02 {

// ---------------------------------------------------------------------------------------------
// Bank conflicts (host code)
// ---------------------------------------------------------------------------------------------

int bank_conflict_ways(const std::array<std::uint32_t, 32>& word_of_lane) {
  // TODO(02.1): Count, per bank, the distinct words the warp touches; take the maximum
  // See lessons/02-memory-hierarchy.md, section "TODO(02.1)".
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Transpose: 32 × 8 thread blocks; the tiled rungs move a 32 × 32 tile, 4 rows per thread.
// ---------------------------------------------------------------------------------------------

constexpr int kTile = 32;
constexpr int kBlockRows = 8;

__global__ void transpose_naive_kernel(const float* __restrict__ in, float* __restrict__ out,
                                       int rows, int cols) {
  // TODO(02.2): Naive transpose: one thread per element, coalesced reads, strided writes
  // See lessons/02-memory-hierarchy.md, section "TODO(02.2)".
}

__global__ void transpose_tiled_kernel(const float* __restrict__ in, float* __restrict__ out,
                                       int rows, int cols) {
  // TODO(02.3): Tiled transpose: load a tile by rows, sync, store it by columns
  // See lessons/02-memory-hierarchy.md, section "TODO(02.3)".
}

__global__ void transpose_padded_kernel(const float* __restrict__ in, float* __restrict__ out,
                                        int rows, int cols) {
  // TODO(02.4): Padded tiled transpose: one extra column removes the bank conflicts
  // See lessons/02-memory-hierarchy.md, section "TODO(02.4)".
}

namespace {
unsigned ceil_div(long long a, long long b) { return static_cast<unsigned>((a + b - 1) / b); }

using TransposeKernel = void (*)(const float*, float*, int, int);

/// Launches a transpose kernel on 32 × 8 blocks; the naive kernel covers 32 × 8 elements per
/// block, the tiled ones a 32 × 32 tile (`rows_per_block`).
void launch_transpose(TransposeKernel kernel, int rows_per_block, const float* in, float* out,
                      int rows, int cols, cudaStream_t stream, const char* who) {
  if (rows < 0 || cols < 0) throw std::invalid_argument(std::string(who) + ": negative size");
  if (rows == 0 || cols == 0) return;
  // gridDim.y is at most 65535: one block row per rows_per_block rows of in.
  if ((static_cast<long long>(rows) + rows_per_block - 1) / rows_per_block > 65535) {
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(rows) + " rows need more than 65535 blocks in y (gridDim.y's limit); at most " +
                                std::to_string(65535LL * rows_per_block) + " rows");
  }
  const dim3 grid(ceil_div(cols, kTile), ceil_div(rows, rows_per_block));
  kernel<<<grid, dim3(kTile, kBlockRows), 0, stream>>>(in, out, rows, cols);
  CUDA_CHECK_LAUNCH();
}
}  // namespace

void transpose_naive(const float* in, float* out, int rows, int cols, cudaStream_t stream) {
  launch_transpose(transpose_naive_kernel, kBlockRows, in, out, rows, cols, stream, "transpose_naive");
}

void transpose_tiled(const float* in, float* out, int rows, int cols, cudaStream_t stream) {
  launch_transpose(transpose_tiled_kernel, kTile, in, out, rows, cols, stream, "transpose_tiled");
}

void transpose_padded(const float* in, float* out, int rows, int cols, cudaStream_t stream) {
  launch_transpose(transpose_padded_kernel, kTile, in, out, rows, cols, stream, "transpose_padded");
}

// ---------------------------------------------------------------------------------------------
// Reduction: each rung's kernel turns `count` inputs into one partial sum per block; the driver
// (reduce_sum, below) repeats until one value is left.
// ---------------------------------------------------------------------------------------------

/// The sum of v over the 32 lanes of a warp, in lane 0 (given: lesson 02, "Warp shuffles").
/// Each step adds the value `offset` lanes up: 16, 8, 4, 2, 1 — five steps, no shared memory.
/// Equivalent loop: for (lane = 1; lane < 32; ++lane) v[0] += v[lane];
__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

__global__ void reduce_divergent_kernel(const float* __restrict__ x, std::size_t n,
                                        float* __restrict__ partials) {
  extern __shared__ float sdata[];  // blockDim.x floats
  // TODO(02.5): Tree in shared memory, interleaved addressing: thread t adds t + s when t mod 2s = 0
  // See lessons/02-memory-hierarchy.md, section "TODO(02.5)".
}

__global__ void reduce_sequential_kernel(const float* __restrict__ x, std::size_t n,
                                         float* __restrict__ partials) {
  extern __shared__ float sdata[];
  // TODO(02.6): Tree in shared memory, sequential addressing: thread t < s adds t + s
  // See lessons/02-memory-hierarchy.md, section "TODO(02.6)".
}

__global__ void reduce_shuffle_kernel(const float* __restrict__ x, std::size_t n,
                                      float* __restrict__ partials) {
  extern __shared__ float warp_sums[];  // one float per warp
  // TODO(02.7): Warp shuffles: reduce each warp in registers, then the warps' sums
  // See lessons/02-memory-hierarchy.md, section "TODO(02.7)".
}

__global__ void reduce_grid_stride_kernel(const float* __restrict__ x, std::size_t n,
                                          float* __restrict__ partials) {
  extern __shared__ float warp_sums[];
  // TODO(02.8): Grid-stride: each thread sums many elements in a register, then shuffles
  // See lessons/02-memory-hierarchy.md, section "TODO(02.8)".
}

std::size_t reduce_scratch_floats(std::size_t n) {
  // Pass 1 writes ≤ ⌈n/64⌉ partials to the first part, pass 2 ≤ ⌈n/64²⌉ to the second, pass 3
  // back to the first, and so on (blocks hold at least 64 threads).
  return (n + 63) / 64 + (n + 4095) / 4096 + 2;
}

void reduce_sum(SumRung rung, const float* x, std::size_t n, int threads, float* scratch,
                float* result, cudaStream_t stream) {
  if (threads < 64 || threads > 1024 || (threads & (threads - 1)) != 0) {
    throw std::invalid_argument("reduce_sum: threads must be a power of two in [64, 1024]");
  }
  if (n == 0) {
    CUDA_CHECK(cudaMemsetAsync(result, 0, sizeof(float), stream));
    return;
  }
  // The grid-stride rung launches only as many blocks as the GPU holds at once: the occupancy
  // API counts the kernel's registers and shared memory against this GPU's limits (an H200 SM
  // holds 2048 threads, an RTX 4090's 1536, a Turing's 1024).
  int device = 0, sms = 0, per_sm = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, reduce_grid_stride_kernel, threads,
                                                           static_cast<std::size_t>(threads / 32) * sizeof(float)));
  const std::size_t resident_blocks = static_cast<std::size_t>(sms) * static_cast<std::size_t>(std::max(per_sm, 1));
  float* buffers[2] = {scratch, scratch + (n + 63) / 64 + 1};
  const float* in = x;
  std::size_t count = n;
  for (int pass = 0;; ++pass) {
    std::size_t blocks = (count + threads - 1) / threads;
    if (rung == SumRung::kGridStride) blocks = std::min(blocks, resident_blocks);
    float* out = blocks == 1 ? result : buffers[pass % 2];
    const unsigned grid = static_cast<unsigned>(blocks);
    const std::size_t tree_smem = static_cast<std::size_t>(threads) * sizeof(float);
    const std::size_t warp_smem = static_cast<std::size_t>(threads / 32) * sizeof(float);
    switch (rung) {
      case SumRung::kDivergent:
        reduce_divergent_kernel<<<grid, threads, tree_smem, stream>>>(in, count, out);
        break;
      case SumRung::kSequential:
        reduce_sequential_kernel<<<grid, threads, tree_smem, stream>>>(in, count, out);
        break;
      case SumRung::kShuffle:
        reduce_shuffle_kernel<<<grid, threads, warp_smem, stream>>>(in, count, out);
        break;
      case SumRung::kGridStride:
        reduce_grid_stride_kernel<<<grid, threads, warp_smem, stream>>>(in, count, out);
        break;
    }
    CUDA_CHECK_LAUNCH();
    if (blocks == 1) return;
    in = out;
    count = blocks;
  }
}

// ---------------------------------------------------------------------------------------------
// Histograms: grid-stride over the bytes; 256 bins.
// ---------------------------------------------------------------------------------------------

__global__ void histogram_global_kernel(const std::uint8_t* __restrict__ data, std::size_t n,
                                        unsigned int* __restrict__ bins) {
  // TODO(02.9): Histogram with one global atomicAdd per byte
  // See lessons/02-memory-hierarchy.md, section "TODO(02.9)".
}

__global__ void histogram_shared_kernel(const std::uint8_t* __restrict__ data, std::size_t n,
                                        unsigned int* __restrict__ bins) {
  // TODO(02.10): Privatised histogram: count in shared memory, then add each bin once
  // See lessons/02-memory-hierarchy.md, section "TODO(02.10)".
}

namespace {
unsigned histogram_blocks(std::size_t n) {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::size_t needed = (n + 255) / 256;
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(needed, static_cast<std::size_t>(sms) * 8)));
}

using HistogramKernel = void (*)(const std::uint8_t*, std::size_t, unsigned int*);

/// Zeroes the bins, then launches a histogram kernel over the bytes (nothing to launch for n = 0).
void launch_histogram(HistogramKernel kernel, const std::uint8_t* data, std::size_t n, unsigned int* bins,
                      cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(bins, 0, kBins * sizeof(unsigned int), stream));
  if (n == 0) return;
  kernel<<<histogram_blocks(n), 256, 0, stream>>>(data, n, bins);
  CUDA_CHECK_LAUNCH();
}
}  // namespace

void histogram_global(const std::uint8_t* data, std::size_t n, unsigned int* bins, cudaStream_t stream) {
  launch_histogram(histogram_global_kernel, data, n, bins, stream);
}

void histogram_shared(const std::uint8_t* data, std::size_t n, unsigned int* bins, cudaStream_t stream) {
  launch_histogram(histogram_shared_kernel, data, n, bins, stream);
}

// ---------------------------------------------------------------------------------------------
// Given: the strided read of the bandwidth sweep.
// ---------------------------------------------------------------------------------------------

__global__ void strided_copy_kernel(const float* __restrict__ in, float* __restrict__ out,
                                    std::size_t n, int stride) {
  const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    out[i] = in[(i * static_cast<std::size_t>(stride)) % n];  // a warp reads 32 floats `stride` apart
  }
}

void strided_copy(const float* in, float* out, std::size_t n, int stride, cudaStream_t stream) {
  if (n == 0) return;
  if (stride < 1) throw std::invalid_argument("strided_copy: stride must be >= 1");
  strided_copy_kernel<<<histogram_blocks(n), 256, 0, stream>>>(in, out, n, stride);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lab02
