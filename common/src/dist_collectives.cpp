/// @file dist_collectives.cpp
/// @brief The Communicator's library collectives (iallreduce_sum, ireduce_scatter_sum,
/// iall_gather): non-blocking, summed in rank order, with a timeline.
///
/// Why not MPI_Iallreduce: its summation order is the MPI library's choice (it changes with W,
/// the message size and the algorithm), so the sum could not be reproduced by one process
/// summing in rank order, which is what the training labs' tests compare against bit for bit.
/// Instead, the reduce-scatter is an MPI all-to-all of the shards, after which each rank adds its
/// shard's W pieces in rank order; the all-reduce is that, then an MPI all-gather. The bytes per
/// rank are a ring's: (W − 1)/W · 4n each way.
///
/// MPI requires every rank to start collectives on a communicator in the same order. An
/// all-reduce's second phase starts when this rank sees its first phase finished, which happens
/// at different moments on different ranks, so the phases run on two duplicates of the
/// communicator: first phases in start order on one, all-reduces' second phases on the other,
/// started strictly in start order too (one is never started while an earlier all-reduce is
/// still in its first phase).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "dist_internal.hpp"

namespace gpulab::dist {

const char* to_string(Collective op) {
  switch (op) {
    case Collective::kAllReduce: return "all-reduce";
    case Collective::kReduceScatter: return "reduce-scatter";
    case Collective::kAllGather: return "all-gather";
  }
  return "?";
}

Shard shard_of(std::size_t n, int parts, int index) {
  if (parts < 1 || index < 0 || index >= parts) throw std::invalid_argument("shard_of: need parts >= 1 and 0 <= index < parts");
  const std::size_t p = static_cast<std::size_t>(parts), i = static_cast<std::size_t>(index);
  const std::size_t base = n / p, extra = n % p;
  return {i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void Communicator::to_host(float* host, const float* buffer, std::size_t count) {
  if (count > 0 && host != buffer) std::memcpy(host, buffer, count * sizeof(float));
}
void Communicator::from_host(float* buffer, const float* host, std::size_t count) {
  if (count > 0 && host != buffer) std::memcpy(buffer, host, count * sizeof(float));
}

namespace {

int int_count(std::size_t n) {
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max())) throw std::invalid_argument("a collective is limited to 2^31 - 1 floats");
  return static_cast<int>(n);
}

}  // namespace

CollectiveRequest Communicator::start(Collective kind, const float* send, float* recv, std::size_t count, const std::string& label) {
  auto op = std::make_unique<Op>();
  op->kind = kind;
  op->send = send;
  op->recv = recv;
  op->count = count;
  if (first_phase_ == MPI_COMM_NULL) {  // the first library collective: every rank is here too
    MPI_CHECK(PMPI_Comm_dup(comm_, &first_phase_));
    MPI_CHECK(PMPI_Comm_dup(comm_, &second_phase_));
  }
  const int w = size_;
  const Shard mine = shard_of(op->count, w, rank_);
  for (int r = 0; r < w; ++r) {
    const Shard s = shard_of(op->count, w, r);
    op->counts.push_back(int_count(s.count));
    op->offsets.push_back(int_count(s.offset));
    op->piece_counts.push_back(int_count(mine.count));
    op->piece_offsets.push_back(int_count(static_cast<std::size_t>(r) * mine.count));
  }
  const std::size_t which = static_cast<std::size_t>(kind);
  traffic_.collective_calls[which] += 1;
  traffic_.collective_bytes[which] += count * sizeof(float);
  op->id = next_op_id_++;
  op->timeline_index = timeline_.size();
  timeline_.push_back({op->kind, label, op->count, now(), -1.0, -1.0});

  const bool host = memory() == Memory::kHost;
  if (op->kind == Collective::kAllGather) {
    // In: this rank's shard; out: the whole buffer.
    op->host = host ? const_cast<float*>(op->send) : (op->staging.resize(mine.count), op->staging.data());
    op->host_out = host ? op->recv : (op->staging_out.resize(op->count), op->staging_out.data());
    if (!host) to_host(op->host, op->send, mine.count);
    // MPI forbids overlapping buffers except in place: the shard already in its place in recv.
    const bool in_place = host && op->send == op->recv + mine.offset;
    MPI_CHECK(PMPI_Iallgatherv(in_place ? MPI_IN_PLACE : op->host, op->counts[static_cast<std::size_t>(rank_)], MPI_FLOAT, op->host_out,
                               op->counts.data(), op->offsets.data(), MPI_FLOAT, first_phase_, &op->request));
  } else {
    // All-to-all: shard r of this rank's buffer goes to rank r; the W pieces of ours come back.
    op->host = host ? const_cast<float*>(op->send) : (op->staging.resize(op->count), op->staging.data());
    if (!host) to_host(op->host, op->send, op->count);
    if (op->kind == Collective::kReduceScatter) {
      op->host_out = host ? op->recv : (op->staging_out.resize(mine.count), op->staging_out.data());
    }
    op->pieces.resize(static_cast<std::size_t>(w) * mine.count);
    MPI_CHECK(PMPI_Ialltoallv(op->host, op->counts.data(), op->offsets.data(), MPI_FLOAT, op->pieces.data(), op->piece_counts.data(),
                              op->piece_offsets.data(), MPI_FLOAT, first_phase_, &op->request));
  }
  CollectiveRequest request;
  request.id_ = op->id;
  ops_.push_back(std::move(op));
  return request;
}

CollectiveRequest Communicator::iallreduce_sum(float* data, std::size_t count, const std::string& label) {
  note_library_collective("Communicator::iallreduce_sum");
  return start(Collective::kAllReduce, data, data, count, label);
}

CollectiveRequest Communicator::ireduce_scatter_sum(const float* send, float* recv, std::size_t count, const std::string& label) {
  note_library_collective("Communicator::ireduce_scatter_sum");
  return start(Collective::kReduceScatter, send, recv, count, label);
}

CollectiveRequest Communicator::iall_gather(const float* send, float* recv, std::size_t count, const std::string& label) {
  note_library_collective("Communicator::iall_gather");
  return start(Collective::kAllGather, send, recv, count, label);
}

void Communicator::advance(bool block) {
  // In start order; an all-reduce's second phase starts only once no earlier one is still in its
  // first (so that every rank starts second phases in the same order).
  bool earlier_in_first_phase = false;
  for (auto it = ops_.begin(); it != ops_.end();) {
    Op& op = **it;
    if (op.phase == 0 || op.phase == 2) {
      int done = 0;
      // Blocking: on the first operation in flight, which nothing holds back (every earlier one
      // has finished or has just started its second phase above).
      if (block) {
        detail::wait_request(op.request, MPI_STATUS_IGNORE, PMPI_Test, PMPI_Wait);
        done = 1;
        block = false;
      } else {
        MPI_CHECK(PMPI_Test(&op.request, &done, MPI_STATUS_IGNORE));
      }
      if (done && op.phase == 0) op.phase = 1;
      if (done && op.phase == 2) op.phase = 3;
    }
    const Shard mine = shard_of(op.count, size_, rank_);
    if (op.phase == 1 && op.kind != Collective::kAllGather && !earlier_in_first_phase) {
      // Our shard's W pieces, added in rank order.
      float* out = op.kind == Collective::kAllReduce ? op.host + mine.offset : op.host_out;
      const float* pieces = op.pieces.data();
      if (mine.count > 0) std::memcpy(out, pieces, mine.count * sizeof(float));
      for (int r = 1; r < size_; ++r) {
        const float* piece = pieces + static_cast<std::size_t>(r) * mine.count;
        for (std::size_t i = 0; i < mine.count; ++i) out[i] += piece[i];
      }
      if (op.kind == Collective::kAllReduce) {
        MPI_CHECK(PMPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, op.host, op.counts.data(), op.offsets.data(), MPI_FLOAT, second_phase_,
                                   &op.request));
        op.phase = 2;
      } else {
        op.phase = 3;
      }
    } else if (op.phase == 1 && op.kind == Collective::kAllGather) {
      op.phase = 3;
    }
    if (op.phase <= 1 && op.kind == Collective::kAllReduce) earlier_in_first_phase = true;
    if (op.phase == 3) {
      if (memory() != Memory::kHost) {
        if (op.kind == Collective::kAllReduce) from_host(op.recv, op.host, op.count);
        if (op.kind == Collective::kReduceScatter) from_host(op.recv, op.host_out, mine.count);
        if (op.kind == Collective::kAllGather) from_host(op.recv, op.host_out, op.count);
      }
      timeline_[op.timeline_index].completed = now();
      op.phase = 4;
    }
    ++it;
  }
}

void Communicator::progress() { advance(false); }

void Communicator::wait(CollectiveRequest& request) {
  if (!request.pending()) return;
  auto find = [&] {
    return std::find_if(ops_.begin(), ops_.end(), [&](const std::unique_ptr<Op>& op) { return op->id == request.id_; });
  };
  auto it = find();
  if (it == ops_.end()) throw std::logic_error("Communicator::wait: a collective request of another communicator, or waited for twice");
  TimelineEntry& entry = timeline_[(*it)->timeline_index];
  if (entry.waited < 0) entry.waited = now();
  while ((*find())->phase != 4) advance(true);
  ops_.erase(find());
  // Finished ones at the front go too (waited for later, they are found in the timeline).
  request.id_ = -1;
}

}  // namespace gpulab::dist
