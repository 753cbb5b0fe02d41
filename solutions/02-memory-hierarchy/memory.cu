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
  // BEGIN SOLUTION(02.1) Count, per bank, the distinct words the warp touches; take the maximum
  int ways = 1;
  for (int bank = 0; bank < kBanks; ++bank) {
    std::uint32_t distinct_words[32];
    int distinct = 0;
    for (std::uint32_t word : word_of_lane) {
      if (static_cast<int>(word % kBanks) != bank) continue;
      // Lanes reading the same word share one broadcast: count each word once.
      if (std::find(distinct_words, distinct_words + distinct, word) == distinct_words + distinct) {
        distinct_words[distinct++] = word;
      }
    }
    ways = std::max(ways, distinct);
  }
  return ways;
  // STUB: return 0;
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// Transpose: 32 × 8 thread blocks; the tiled rungs move a 32 × 32 tile, 4 rows per thread.
// ---------------------------------------------------------------------------------------------

constexpr int kTile = 32;
constexpr int kBlockRows = 8;

__global__ void transpose_naive_kernel(const float* __restrict__ in, float* __restrict__ out,
                                       int rows, int cols) {
  // BEGIN SOLUTION(02.2) Naive transpose: one thread per element, coalesced reads, strided writes
  // Consecutive threads (x) read consecutive columns of a row — coalesced — and write the same
  // elements down a column of out, `rows` floats apart: every lane its own 32-byte sector.
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols) {
    out[static_cast<std::size_t>(c) * rows + r] = in[static_cast<std::size_t>(r) * cols + c];
  }
  // END SOLUTION
}

__global__ void transpose_tiled_kernel(const float* __restrict__ in, float* __restrict__ out,
                                       int rows, int cols) {
  // BEGIN SOLUTION(02.3) Tiled transpose: load a tile by rows, sync, store it by columns
  __shared__ float tile[kTile][kTile];
  const int c0 = blockIdx.x * kTile;  // this block's tile: rows r0.., columns c0.. of in
  const int r0 = blockIdx.y * kTile;
  // kTile / kBlockRows = 4 rows per thread, loaded into registers first: the 4 global loads are
  // all in flight before the first shared-memory store (load, store, load, store waits for each
  // load in turn: one load in flight per thread).
  float v[kTile / kBlockRows];
#pragma unroll
  for (int k = 0; k < kTile / kBlockRows; ++k) {
    const int r = r0 + static_cast<int>(threadIdx.y) + k * kBlockRows, c = c0 + threadIdx.x;
    v[k] = r < rows && c < cols ? in[static_cast<std::size_t>(r) * cols + c] : 0.0f;
  }
#pragma unroll
  for (int k = 0; k < kTile / kBlockRows; ++k) tile[threadIdx.y + k * kBlockRows][threadIdx.x] = v[k];
  __syncthreads();  // the whole tile is loaded before any thread reads another's element
  // out[c0 + dy][r0 + x] = in[r0 + x][c0 + dy] = tile[x][dy]: consecutive threads now write
  // consecutive columns of out (coalesced) and read a *column* of the tile: word 32·x + dy, all
  // in bank dy — a 32-way bank conflict.
#pragma unroll
  for (int k = 0; k < kTile / kBlockRows; ++k) {
    const int dy = static_cast<int>(threadIdx.y) + k * kBlockRows;
    const int out_r = c0 + dy, out_c = r0 + threadIdx.x;
    if (out_r < cols && out_c < rows) out[static_cast<std::size_t>(out_r) * rows + out_c] = tile[threadIdx.x][dy];
  }
  // END SOLUTION
}

__global__ void transpose_padded_kernel(const float* __restrict__ in, float* __restrict__ out,
                                        int rows, int cols) {
  // BEGIN SOLUTION(02.4) Padded tiled transpose: one extra column removes the bank conflicts
  // Rows of 33 words: element [x][dy] is word 33·x + dy, in bank (x + dy) mod 32 — a different
  // bank for every lane of the warp.
  __shared__ float tile[kTile][kTile + 1];
  const int c0 = blockIdx.x * kTile;
  const int r0 = blockIdx.y * kTile;
  float v[kTile / kBlockRows];  // 4 loads in flight per thread, as in 02.3
#pragma unroll
  for (int k = 0; k < kTile / kBlockRows; ++k) {
    const int r = r0 + static_cast<int>(threadIdx.y) + k * kBlockRows, c = c0 + threadIdx.x;
    v[k] = r < rows && c < cols ? in[static_cast<std::size_t>(r) * cols + c] : 0.0f;
  }
#pragma unroll
  for (int k = 0; k < kTile / kBlockRows; ++k) tile[threadIdx.y + k * kBlockRows][threadIdx.x] = v[k];
  __syncthreads();
#pragma unroll
  for (int k = 0; k < kTile / kBlockRows; ++k) {
    const int dy = static_cast<int>(threadIdx.y) + k * kBlockRows;
    const int out_r = c0 + dy, out_c = r0 + threadIdx.x;
    if (out_r < cols && out_c < rows) out[static_cast<std::size_t>(out_r) * rows + out_c] = tile[threadIdx.x][dy];
  }
  // END SOLUTION
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
  // BEGIN SOLUTION(02.5) Tree in shared memory, interleaved addressing: thread t adds t + s when t mod 2s = 0
  const unsigned tid = threadIdx.x;
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + tid;
  sdata[tid] = i < n ? x[i] : 0.0f;
  __syncthreads();
  // In step s only threads with tid mod 2s = 0 work: the active lanes of each warp thin out,
  // but every warp stays busy (divergence), and the strided accesses conflict on banks.
  for (unsigned s = 1; s < blockDim.x; s *= 2) {
    if (tid % (2 * s) == 0) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid == 0) partials[blockIdx.x] = sdata[0];
  // END SOLUTION
}

__global__ void reduce_sequential_kernel(const float* __restrict__ x, std::size_t n,
                                         float* __restrict__ partials) {
  extern __shared__ float sdata[];
  // BEGIN SOLUTION(02.6) Tree in shared memory, sequential addressing: thread t < s adds t + s
  const unsigned tid = threadIdx.x;
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + tid;
  sdata[tid] = i < n ? x[i] : 0.0f;
  __syncthreads();
  // The active threads are the first s: whole warps retire together (no divergence until
  // s < 32), and consecutive threads touch consecutive words (no bank conflicts).
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid == 0) partials[blockIdx.x] = sdata[0];
  // END SOLUTION
}

__global__ void reduce_shuffle_kernel(const float* __restrict__ x, std::size_t n,
                                      float* __restrict__ partials) {
  extern __shared__ float warp_sums[];  // one float per warp
  // BEGIN SOLUTION(02.7) Warp shuffles: reduce each warp in registers, then the warps' sums
  const unsigned tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + tid;
  float v = warp_sum(i < n ? x[i] : 0.0f);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = warp_sum(lane < blockDim.x / 32 ? warp_sums[lane] : 0.0f);
    if (lane == 0) partials[blockIdx.x] = v;
  }
  // END SOLUTION
}

__global__ void reduce_grid_stride_kernel(const float* __restrict__ x, std::size_t n,
                                          float* __restrict__ partials) {
  extern __shared__ float warp_sums[];
  // BEGIN SOLUTION(02.8) Grid-stride: each thread sums many elements in a register, then shuffles
  const unsigned tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const std::size_t start = static_cast<std::size_t>(blockIdx.x) * blockDim.x + tid;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  float v = 0.0f;
  // 16-byte loads when x is 16-byte aligned: a quarter of the load instructions. The plain
  // loop, for (i = start; i < n; i += stride) v += x[i], is all the lab asks for.
  std::size_t scalar_from = 0;
  if (reinterpret_cast<std::uintptr_t>(x) % alignof(float4) == 0) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    for (std::size_t i = start; i < n / 4; i += stride) {
      const float4 q = x4[i];
      v += (q.x + q.y) + (q.z + q.w);
    }
    scalar_from = n / 4 * 4;
  }
  for (std::size_t i = scalar_from + start; i < n; i += stride) v += x[i];
  v = warp_sum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = warp_sum(lane < blockDim.x / 32 ? warp_sums[lane] : 0.0f);
    if (lane == 0) partials[blockIdx.x] = v;
  }
  // END SOLUTION
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
  // BEGIN SOLUTION(02.9) Histogram with one global atomicAdd per byte
  // Every increment goes to L2; when many threads hit the same bin (skewed data) they queue up.
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    atomicAdd(&bins[data[i]], 1u);
  }
  // END SOLUTION
}

__global__ void histogram_shared_kernel(const std::uint8_t* __restrict__ data, std::size_t n,
                                        unsigned int* __restrict__ bins) {
  // BEGIN SOLUTION(02.10) Privatised histogram: count in shared memory, then add each bin once
  __shared__ unsigned int local[kBins];
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  // 16 bytes per load (one 128-bit load, 16 shared-memory atomics), not one byte: a byte per
  // load leaves the memory system mostly idle. Bytes before the first 16-byte boundary and after
  // the last whole word are counted one at a time.
  const std::size_t head = (16 - reinterpret_cast<std::uintptr_t>(data) % 16) % 16;
  const std::size_t lead = head < n ? head : n;
  const std::size_t words = (n - lead) / 16;
  const uint4* vec = reinterpret_cast<const uint4*>(data + lead);
  for (std::size_t w = first; w < words; w += stride) {
    const uint4 v = vec[w];
    const unsigned parts[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int q = 0; q < 16; ++q) atomicAdd(&local[(parts[q / 4] >> (8 * (q % 4))) & 0xFFu], 1u);  // on-SM atomics: far cheaper than L2's
  }
  for (std::size_t i = first; i < lead; i += stride) atomicAdd(&local[data[i]], 1u);
  for (std::size_t i = lead + words * 16 + first; i < n; i += stride) atomicAdd(&local[data[i]], 1u);
  __syncthreads();
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) {
    if (local[b] != 0) atomicAdd(&bins[b], local[b]);  // one global atomic per bin per block
  }
  // END SOLUTION
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
