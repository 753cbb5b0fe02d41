/// @file decode.cu
/// @brief Lab 12, part 5 — paged decode attention on the GPU: one query per (sequence, head)
/// against that sequence's fp16 keys and values found through its block table, the positions cut
/// into ranges (split-K) whose partial softmaxes a second kernel merges by their log-sum-exp.
/// Read lessons/12-serving.md, section "TODO(12.5)".
///
///   decode_ranges   one thread block per (head, sequence, range), 4 warps; a group of hd/8 lanes
///                   per key, each lane 8 channels (one 16-byte load of K and one of V), the dot
///                   product summed across the group by shuffles; each group keeps an online
///                   softmax (m, l, acc) over its keys, merged across groups by shuffles and
///                   across warps through shared memory. The loads of 4 keys are issued
///                   unconditionally (a key past the range reads the range's last one and is
///                   masked out afterwards), kept as raw 16-byte words and converted only when
///                   used, so that all 8 are in flight at once; hd is a template parameter and the
///                   block asks for 8 resident blocks per SM (≤ 64 registers)
///   merge_ranges    one thread per channel: the ranges' (m, l, acc) weighted by exp(m − max m)
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "decode.hpp"
#include "gpulab/check.hpp"

namespace lab12 {

// BEGIN SOLUTION(12.5) Paged decode attention: split-K over the positions, a log-sum-exp merge
namespace {

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kUnroll = 4;  // keys per lane group whose loads are issued before any is used
constexpr unsigned kFullMask = 0xffffffffu;

/// Eight fp16 values (one 16-byte word) as floats.
__device__ inline void unpack8(const uint4& raw, float (&f)[8]) {
  const __half2* h = reinterpret_cast<const __half2*>(&raw);
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __low2float(h[i]);
    f[2 * i + 1] = __high2float(h[i]);
  }
}

/// exp(m − top), and 0 for a part that saw no key (m = −∞): −∞ − (−∞) would be NaN.
__device__ inline float weight(float m, float top) { return m == -INFINITY ? 0.0f : expf(m - top); }

/// (m, l, acc) ← the merge of itself and (m2, l2, acc2): both rescaled to the larger maximum.
__device__ inline void combine(float& m, float& l, float (&acc)[8], float m2, float l2, const float (&acc2)[8]) {
  const float top = fmaxf(m, m2), a = weight(m, top), b = weight(m2, top);
  l = l * a + l2 * b;
  for (int i = 0; i < 8; ++i) acc[i] = acc[i] * a + acc2[i] * b;
  m = top;
}

template <int HD>
__global__ void __launch_bounds__(kThreads, 8) decode_ranges(PagedAttention a, int splits, float* workspace) {
  constexpr int G = HD / 8, per_warp = 32 / G;  // lanes per key, keys per warp at a time
  const int h = blockIdx.x, s = blockIdx.y, r = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, group = lane / G, part = lane % G;
  const int n = a.lengths[s], chunk = (n + splits - 1) / splits;
  const int begin = min(n, r * chunk), end = min(n, begin + chunk);
  const std::size_t qh = (static_cast<std::size_t>(s) * a.heads + h) * HD;

  float q[8];
  for (int i = 0; i < 8; ++i) q[i] = a.queries[qh + part * 8 + i] * a.scale;
  float m = -INFINITY, l = 0.0f, acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  const int* table = a.tables + static_cast<std::size_t>(s) * a.table_width;
  const std::size_t head_offset = static_cast<std::size_t>(h) * a.block_size * HD + part * 8;
  const int stride = kWarps * per_warp;  // keys the block covers per unrolled step

  // The loop bound depends on the warp only, so every lane takes every shuffle.
  for (int j0 = begin + warp * per_warp; j0 < end; j0 += stride * kUnroll) {
    uint4 k[kUnroll], v[kUnroll];
    for (int u = 0; u < kUnroll; ++u) {  // every load first, none conditional: 8 reads in flight per lane
      const int j = min(j0 + u * stride + group, end - 1);  // past the range: its last key again, masked below
      const std::size_t row = static_cast<std::size_t>(table[j / a.block_size]) * a.block_stride + head_offset +
                              static_cast<std::size_t>(j % a.block_size) * HD;
      k[u] = *reinterpret_cast<const uint4*>(a.keys + row);
      v[u] = *reinterpret_cast<const uint4*>(a.values + row);
    }
    for (int u = 0; u < kUnroll; ++u) {
      float f[8];
      unpack8(k[u], f);
      float dot = 0.0f;
      for (int i = 0; i < 8; ++i) dot += q[i] * f[i];
      for (int o = G / 2; o > 0; o /= 2) dot += __shfl_xor_sync(kFullMask, dot, o);  // the group's sum
      if (j0 + u * stride + group < end) {  // online softmax: rescale what was summed when the maximum grows
        const float top = fmaxf(m, dot), c = weight(m, top), p = expf(dot - top);
        unpack8(v[u], f);
        l = l * c + p;
        for (int i = 0; i < 8; ++i) acc[i] = acc[i] * c + p * f[i];
        m = top;
      }
    }
  }
  // The warp's groups merged: lanes with the same part hold the same channels.
  for (int o = G; o < 32; o *= 2) {  // (none when a group is the whole warp)
    float acc2[8];
    const float m2 = __shfl_xor_sync(kFullMask, m, o), l2 = __shfl_xor_sync(kFullMask, l, o);
    for (int i = 0; i < 8; ++i) acc2[i] = __shfl_xor_sync(kFullMask, acc[i], o);
    combine(m, l, acc, m2, l2, acc2);
  }
  // Then the block's warps, through shared memory.
  __shared__ float shared_m[kWarps], shared_l[kWarps], shared_acc[kWarps][HD];
  if (group == 0) {
    if (part == 0) {
      shared_m[warp] = m;
      shared_l[warp] = l;
    }
    for (int i = 0; i < 8; ++i) shared_acc[warp][part * 8 + i] = acc[i];
  }
  __syncthreads();
  if (warp == 0 && group == 0) {
    for (int w = 1; w < kWarps; ++w) {
      float acc2[8];
      for (int i = 0; i < 8; ++i) acc2[i] = shared_acc[w][part * 8 + i];
      combine(m, l, acc, shared_m[w], shared_l[w], acc2);
    }
    float* record = workspace + ((static_cast<std::size_t>(s) * a.heads + h) * splits + r) * (HD + 2);
    if (part == 0) {
      record[0] = m;
      record[1] = l;
    }
    for (int i = 0; i < 8; ++i) record[2 + part * 8 + i] = acc[i];
  }
}

__global__ void merge_ranges(PagedAttention a, int splits, const float* workspace) {
  const int h = blockIdx.x, s = blockIdx.y, c = threadIdx.x, hd = a.hd;
  const float* records = workspace + (static_cast<std::size_t>(s) * a.heads + h) * splits * (hd + 2);
  float top = -INFINITY;
  for (int r = 0; r < splits; ++r) top = fmaxf(top, records[r * (hd + 2)]);
  float l = 0.0f, acc = 0.0f;
  for (int r = 0; r < splits; ++r) {
    const float* record = records + r * (hd + 2);
    const float w = weight(record[0], top);
    l += record[1] * w;
    acc += record[2 + c] * w;
  }
  a.out[(static_cast<std::size_t>(s) * a.heads + h) * hd + c] = acc / l;
}

}  // namespace

void paged_decode_attention(const PagedAttention& a, int splits, float* workspace, cudaStream_t stream) {
  std::string why;
  if (splits < 1 || splits > 65535) why = "splits = " + std::to_string(splits) + " (1 … 65535)";
  else if (a.hd < 16 || a.hd > 256 || (a.hd & (a.hd - 1)) != 0) why = "hd = " + std::to_string(a.hd) + " (a power of two from 16 to 256)";
  else if (a.block_size < 1) why = "block_size = " + std::to_string(a.block_size);
  else if (a.sequences < 1 || a.sequences > 65535 || a.heads < 1) why = std::to_string(a.sequences) + " sequences of " + std::to_string(a.heads) + " heads";
  else if (a.block_stride % 8 != 0) why = "block_stride = " + std::to_string(a.block_stride) + " halves (a multiple of 8: rows of 16 bytes)";
  else if (!a.keys || !a.values || !a.queries || !a.tables || !a.lengths || !a.out || !workspace) why = "a null pointer";
  else if (reinterpret_cast<std::uintptr_t>(a.keys) % 16 != 0 || reinterpret_cast<std::uintptr_t>(a.values) % 16 != 0) why = "keys or values not 16-byte aligned";
  if (!why.empty()) throw std::invalid_argument("paged_decode_attention: " + why);
  const dim3 grid(a.heads, a.sequences, splits);
  switch (a.hd) {  // one instantiation per head width: the group size and the shuffles known at compile time
    case 16: decode_ranges<16><<<grid, kThreads, 0, stream>>>(a, splits, workspace); break;
    case 32: decode_ranges<32><<<grid, kThreads, 0, stream>>>(a, splits, workspace); break;
    case 64: decode_ranges<64><<<grid, kThreads, 0, stream>>>(a, splits, workspace); break;
    case 128: decode_ranges<128><<<grid, kThreads, 0, stream>>>(a, splits, workspace); break;
    default: decode_ranges<256><<<grid, kThreads, 0, stream>>>(a, splits, workspace); break;
  }
  CUDA_CHECK(cudaGetLastError());
  merge_ranges<<<dim3(a.heads, a.sequences), a.hd, 0, stream>>>(a, splits, workspace);
  CUDA_CHECK(cudaGetLastError());
}
// STUB: void paged_decode_attention(const PagedAttention& a, int splits, float* workspace, cudaStream_t stream) {
// STUB:   (void)a; (void)splits; (void)workspace; (void)stream;  // delete once you use them
// STUB: }
// END SOLUTION

}  // namespace lab12
