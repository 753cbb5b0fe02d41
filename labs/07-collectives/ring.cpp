/// @file ring.cpp
/// @brief Lab 07 — a ring all-reduce from point-to-point messages: reduce-scatter, then
/// all-gather, each W − 1 steps, each step pipelined in segments. Read lessons/07-collectives.md.
///
/// Napkin math (the α-β model): a step moves one chunk, n/W floats, so it costs α + (4n/W)/β.
/// 2(W − 1) steps: T ≈ 2(W − 1)·α + 2(W − 1)/W · 4n/β. The bandwidth term barely grows with W,
/// which is why the ring is the algorithm of choice for large messages.
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "ring.hpp"

namespace lab07 {

using gpulab::dist::Communicator;
using gpulab::dist::Request;

Chunk chunk_of(std::size_t n, int parts, int index) {
  // TODO(07.1): Split n elements into balanced contiguous chunks
  // See lessons/07-collectives.md, section "TODO(07.1)".
  return {};
}

void ring_step(Communicator& comm, float* data, Chunk send, Chunk recv, bool reduce) {
  const int next = (comm.rank() + 1) % comm.size();
  const int prev = (comm.rank() + comm.size() - 1) % comm.size();
  // TODO(07.2): One pipelined ring step: send a chunk on, receive one, segment by segment
  // See lessons/07-collectives.md, section "TODO(07.2)".
}

void ring_reduce_scatter(Communicator& comm, float* data, std::size_t n) {
  // TODO(07.3): Reduce-scatter: W − 1 steps, each passing a partial sum one rank on
  // See lessons/07-collectives.md, section "TODO(07.3)".
}

void ring_all_gather(Communicator& comm, float* data, std::size_t n) {
  // TODO(07.4): All-gather: W − 1 steps, each passing a finished chunk one rank on
  // See lessons/07-collectives.md, section "TODO(07.4)".
}

void ring_allreduce(Communicator& comm, const float* send, float* recv, std::size_t n) {
  // TODO(07.5): All-reduce = copy (out of place) + reduce-scatter + all-gather
  // See lessons/07-collectives.md, section "TODO(07.5)".
}

}  // namespace lab07
