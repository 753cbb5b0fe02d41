/// @file memory.hpp
/// @brief Lab 02 — the memory hierarchy: the functions you implement in
/// labs/02-memory-hierarchy/memory.cu.
///
/// This header belongs to the tests: do not change it. Matrices are row-major floats in device
/// memory; sizes may be 1, primes, or anything not a multiple of a tile.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace lab02 {

/// Shared memory has 32 banks of 4-byte words: word w lives in bank w mod 32.
inline constexpr int kBanks = 32;

/// TODO(02.1): how many ways a warp's shared-memory access is serialised: the largest number of
/// *distinct* words that fall in one bank (lanes reading the same word are served by one
/// broadcast). 1 means conflict-free; 32 the worst case.
int bank_conflict_ways(const std::array<std::uint32_t, 32>& word_of_lane);

/// out (cols × rows) = in (rows × cols) transposed. Three rungs of the same operation:
/// TODO(02.2) one thread per element, straight from global memory;
/// TODO(02.3) through a 32 × 32 shared-memory tile, so both global reads and writes coalesce;
/// TODO(02.4) the same tile padded to remove the bank conflicts of reading it by column.
/// All three throw std::invalid_argument for negative sizes; transpose_naive also for more than
/// 65535 × 8 = 524 280 rows (its blocks cover 8 rows each, and gridDim.y is at most 65535).
void transpose_naive(const float* in, float* out, int rows, int cols, cudaStream_t stream = 0);
void transpose_tiled(const float* in, float* out, int rows, int cols, cudaStream_t stream = 0);
void transpose_padded(const float* in, float* out, int rows, int cols, cudaStream_t stream = 0);

/// The four rungs of the sum reduction (lesson 02, "The reduction ladder").
enum class SumRung {
  kDivergent,   ///< TODO(02.5) shared-memory tree, interleaved addressing (divergent warps)
  kSequential,  ///< TODO(02.6) shared-memory tree, sequential addressing (no divergence)
  kShuffle,     ///< TODO(02.7) warp shuffles instead of shared memory within each warp
  kGridStride,  ///< TODO(02.8) a capped grid: each thread sums many elements, one partial per block
};

/// Floats of scratch space reduce_sum needs for n elements (given).
std::size_t reduce_scratch_floats(std::size_t n);

/// *result (device memory) = Σ x[i] for i < n (0 for n = 0), by the chosen rung, with blocks of
/// `threads` threads (a power of two, 64 to 1024). Asynchronous on `stream`.
void reduce_sum(SumRung rung, const float* x, std::size_t n, int threads, float* scratch,
                float* result, cudaStream_t stream = 0);

/// Number of bins of the byte histogram.
inline constexpr int kBins = 256;

/// bins[v] = number of i < n with data[i] == v (bins has kBins entries; the function sets them).
/// TODO(02.9) with atomics on global memory; TODO(02.10) privatised in shared memory per block.
void histogram_global(const std::uint8_t* data, std::size_t n, unsigned int* bins, cudaStream_t stream = 0);
void histogram_shared(const std::uint8_t* data, std::size_t n, unsigned int* bins, cudaStream_t stream = 0);

/// Given (no TODO): out[i] = in[(i · stride) mod n] for i < n — reads with a stride, for the
/// bandwidth-vs-stride sweep of the lesson.
void strided_copy(const float* in, float* out, std::size_t n, int stride, cudaStream_t stream = 0);

}  // namespace lab02
