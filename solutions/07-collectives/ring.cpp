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
  // BEGIN SOLUTION(07.1) Split n elements into balanced contiguous chunks
  if (parts < 1 || index < 0 || index >= parts) {
    throw std::invalid_argument("chunk_of: need parts >= 1 and 0 <= index < parts");
  }
  const std::size_t p = static_cast<std::size_t>(parts);
  const std::size_t i = static_cast<std::size_t>(index);
  const std::size_t base = n / p;
  const std::size_t extra = n % p;  // the first `extra` chunks hold one element more
  return {i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
  // STUB: return {};
  // END SOLUTION
}

void ring_step(Communicator& comm, float* data, Chunk send, Chunk recv, bool reduce) {
  const int next = (comm.rank() + 1) % comm.size();
  const int prev = (comm.rank() + comm.size() - 1) % comm.size();
  // BEGIN SOLUTION(07.2) One pipelined ring step: send a chunk on, receive one, segment by segment
  // Post every receive and send of the step first, then reduce each segment as soon as it has
  // arrived: the reduction of segment k overlaps the transfer of segment k + 1. Receives go to
  // scratch when reducing (data still holds our partial sum there), straight into place when
  // gathering. The send and receive chunks of a step are never the same chunk.
  float* incoming = reduce ? comm.scratch(recv.count) : data + recv.offset;
  std::vector<Request> receives, sends;
  for (std::size_t off = 0; off < recv.count; off += kSegment) {
    receives.push_back(comm.irecv(incoming + off, std::min(kSegment, recv.count - off), prev));
  }
  for (std::size_t off = 0; off < send.count; off += kSegment) {
    sends.push_back(comm.isend(data + send.offset + off, std::min(kSegment, send.count - off), next));
  }
  for (std::size_t k = 0; k < receives.size(); ++k) {
    comm.wait(receives[k]);
    if (reduce) {
      const std::size_t off = k * kSegment;
      comm.add(data + recv.offset + off, incoming + off, std::min(kSegment, recv.count - off));
    }
  }
  comm.wait_all(sends);
  // END SOLUTION
}

void ring_reduce_scatter(Communicator& comm, float* data, std::size_t n) {
  // BEGIN SOLUTION(07.3) Reduce-scatter: W − 1 steps, each passing a partial sum one rank on
  const int w = comm.size();
  const int r = comm.rank();
  for (int step = 0; step < w - 1; ++step) {
    // Step 0 sends our own chunk r; each later step forwards the chunk we added to last step.
    const int send_index = (r - step + w) % w;
    const int recv_index = (r - step - 1 + 2 * w) % w;  // what the previous rank sends now
    ring_step(comm, data, chunk_of(n, w, send_index), chunk_of(n, w, recv_index), /*reduce=*/true);
  }
  // END SOLUTION
}

void ring_all_gather(Communicator& comm, float* data, std::size_t n) {
  // BEGIN SOLUTION(07.4) All-gather: W − 1 steps, each passing a finished chunk one rank on
  const int w = comm.size();
  const int r = comm.rank();
  for (int step = 0; step < w - 1; ++step) {
    const int send_index = (r + 1 - step + w) % w;  // step 0: the chunk this rank finished
    const int recv_index = (r - step + w) % w;
    ring_step(comm, data, chunk_of(n, w, send_index), chunk_of(n, w, recv_index), /*reduce=*/false);
  }
  // END SOLUTION
}

void ring_allreduce(Communicator& comm, const float* send, float* recv, std::size_t n) {
  // BEGIN SOLUTION(07.5) All-reduce = copy (out of place) + reduce-scatter + all-gather
  if (n == 0) return;  // defined: nothing to reduce, no message
  comm.copy(recv, send, n);  // a no-op in place
  ring_reduce_scatter(comm, recv, n);
  ring_all_gather(comm, recv, n);
  // END SOLUTION
}

}  // namespace lab07
