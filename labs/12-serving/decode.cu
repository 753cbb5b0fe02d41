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

// TODO(12.5): Paged decode attention: split-K over the positions, a log-sum-exp merge
// See lessons/12-serving.md, section "TODO(12.5)".
void paged_decode_attention(const PagedAttention& a, int splits, float* workspace, cudaStream_t stream) {
  (void)a; (void)splits; (void)workspace; (void)stream;  // delete once you use them
}

}  // namespace lab12
