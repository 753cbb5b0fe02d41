/// @file decode.hpp
/// @brief Lab 12, part 5 — paged decode attention on the GPU: the function you implement in
/// labs/12-serving/decode.cu. Read lessons/12-serving.md, section "TODO(12.5)".
///
/// This header belongs to the tests: do not change it. A decode step gives every running
/// sequence one query row per head; each attends to all of its sequence's cached positions,
/// whose keys and values sit in a pool of blocks in fp16, found through the sequence's block
/// table — PagedCache's layout (12.3) on the device, one layer of it. The work is a read of every
/// cached key and value once: memory-bound at about 1 FLOP per byte (lesson 12), so the kernel's
/// figure is bytes of K and V read per second against the device's copy bandwidth.
///
/// Split-K ("flash-decoding"): one (sequence, head) alone is too little work to fill a GPU, so
/// the positions of each are cut into `splits` ranges, each range's partial softmax computed by
/// its own thread block — its maximum score m, its sum of exponentials l = Σ exp(s_j − m) and its
/// unnormalized output acc = Σ exp(s_j − m)·v_j — and a second kernel merges the ranges by their
/// log-sum-exp: M = max m_i, out = Σ acc_i·exp(m_i − M) / Σ l_i·exp(m_i − M). A range with no
/// position (more splits than positions) has m = −∞, l = 0, acc = 0 and weighs nothing.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

namespace lab12 {

/// One layer's paged keys and values and one query per (sequence, head).
struct PagedAttention {
  const __half* keys = nullptr;    ///< key of (block b, head h, slot t) at keys[b·block_stride + (h·B + t)·hd], hd halves; 16-byte aligned
  const __half* values = nullptr;  ///< the same layout for values; 16-byte aligned
  std::size_t block_stride = 0;    ///< halves from one block to the next (PagedCache: layers·2·heads·B·hd); a multiple of 8
  const float* queries = nullptr;  ///< sequences × heads × hd, fp32
  const int* tables = nullptr;     ///< sequences × table_width block ids, row by row (device memory)
  const int* lengths = nullptr;    ///< per sequence, the positions 0 … lengths[s] − 1 it attends to (≥ 1; device memory)
  float* out = nullptr;            ///< sequences × heads × hd, fp32: softmax(q·Kᵀ·scale)·V per (sequence, head)
  int sequences = 0, heads = 0;
  int hd = 0;          ///< a power of two from 16 to 256
  int block_size = 0;  ///< B ≥ 1
  int table_width = 0; ///< block ids per table row (≥ ⌈longest length / B⌉)
  float scale = 0.0f;  ///< 1/√hd, as decode_rows uses
};

/// The floats of workspace paged_decode_attention needs for @p splits ranges: one (m, l, acc[hd])
/// record per (sequence, head, range).
inline std::size_t decode_workspace_floats(int sequences, int heads, int hd, int splits) {
  return static_cast<std::size_t>(sequences) * static_cast<std::size_t>(heads) * static_cast<std::size_t>(splits) * (static_cast<std::size_t>(hd) + 2);
}

/// TODO(12.5): out for every (sequence, head), asynchronously on @p stream: each sequence's
/// positions cut into @p splits ranges of ⌈length / splits⌉ (the last ones shorter or empty),
/// each range's (m, l, acc) written to @p workspace (decode_workspace_floats of it), then merged.
/// Keys and values are fp16, every sum fp32. Throws std::invalid_argument (launching nothing) for
/// splits < 1 or above 65535, an hd that is not a power of two in [16, 256], B < 1, no sequences
/// (or more than 65535) or no heads, a block_stride that is not a multiple of 8, keys or values
/// not 16-byte aligned, or a null pointer.
void paged_decode_attention(const PagedAttention& a, int splits, float* workspace, cudaStream_t stream = 0);

}  // namespace lab12
