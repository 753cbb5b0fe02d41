/// @file ring.hpp
/// @brief Lab 07 — collectives: the functions you implement in labs/07-collectives/ring.cpp.
///
/// This header belongs to the tests: do not change it. Everything goes through a
/// gpulab::dist::Communicator (common/include/gpulab/dist.hpp): point-to-point only (isend,
/// irecv, wait, sendrecv), plus add / copy / scratch in the buffers' memory. Calling a library
/// collective (MPI_Allreduce & co., Communicator::allreduce_sum, ncclAllReduce) fails the lab.
///
/// Ranks 0 … W−1 form a ring: rank r sends to (r + 1) mod W and receives from (r − 1) mod W.
/// The n elements are split into W chunks (chunk_of). After the reduce-scatter, rank r holds the
/// complete sum of chunk (r + 1) mod W.
#pragma once

#include <cstddef>

#include "gpulab/dist.hpp"

namespace lab07 {

/// A contiguous piece of the n elements: [offset, offset + count).
struct Chunk {
  std::size_t offset = 0;
  std::size_t count = 0;
};

/// Elements per pipelined segment: 64 Ki floats (256 KiB).
inline constexpr std::size_t kSegment = 65536;

/// TODO(07.1): chunk `index` of n elements split into `parts` contiguous chunks whose sizes
/// differ by at most one, the larger ones first (n = 10, parts = 4: 3, 3, 2, 2). Throws
/// std::invalid_argument unless parts ≥ 1 and 0 ≤ index < parts.
Chunk chunk_of(std::size_t n, int parts, int index);

/// TODO(07.2): one ring step: send `send` (a chunk of data) to the next rank while receiving
/// `recv` from the previous one, kSegment elements at a time; add each received segment into
/// data (reduce = true) or store it in place (reduce = false).
void ring_step(gpulab::dist::Communicator& comm, float* data, Chunk send, Chunk recv, bool reduce);

/// TODO(07.3): ring reduce-scatter of data[0, n): afterwards rank r's chunk (r + 1) mod W holds
/// the sum over all ranks; the other chunks hold partial sums.
void ring_reduce_scatter(gpulab::dist::Communicator& comm, float* data, std::size_t n);

/// TODO(07.4): ring all-gather: rank r starts with the final chunk (r + 1) mod W and ends with
/// every chunk.
void ring_all_gather(gpulab::dist::Communicator& comm, float* data, std::size_t n);

/// TODO(07.5): recv[i] = Σ over ranks of send[i], on every rank. send may equal recv (in place);
/// n may be 0 (nothing is sent). Only point-to-point messages to the next rank.
void ring_allreduce(gpulab::dist::Communicator& comm, const float* send, float* recv, std::size_t n);

}  // namespace lab07
