/// @file zero.cpp
/// @brief Lab 08 — ZeRO stage 1: each rank keeps the AdamW moments of its own shard of the
/// parameters. Read lessons/08-data-parallel.md, "TODO(08.7)".
///
/// Memory per rank, fp32 training with AdamW (4 bytes each of weight, gradient, m, v): plain
/// DDP holds 16P bytes; ZeRO-1 holds 4P + 4P + 8P/W. The communication is the same as an
/// all-reduce's: a reduce-scatter and an all-gather, (W − 1)/W · 4P bytes each.
#include <vector>

#include "ddp.hpp"

namespace lab08 {

using gpulab::dist::CollectiveRequest;

/// The flat layout of the parameters and this rank's shard of it, with the optimizer that
/// updates the shard.
struct ZeroAdamW::State {
  State(Communicator& c, float lr, float beta1, float beta2, float eps, float weight_decay)
      : comm(c), adam(lr, beta1, beta2, eps, weight_decay) {}
  Communicator& comm;
  std::vector<nn::Parameter*> params;  ///< the non-frozen ones, in order
  std::size_t total = 0;               ///< floats of all of them
  gpulab::dist::Shard shard;           ///< this rank's part of [0, total)
  nn::Tensor flat_grads, flat_values;  ///< 1 × total each, in the parameters' memory
  nn::Parameter mine;                  ///< this rank's shard: its values and averaged gradient
  nn::AdamW adam;                      ///< steps `mine` only: its moments are 2 × shard floats
};

ZeroAdamW::ZeroAdamW(Communicator& comm, std::vector<nn::Parameter*> params, float lr, float beta1, float beta2, float eps, float weight_decay)
    : state_(std::make_unique<State>(comm, lr, beta1, beta2, eps, weight_decay)) {
  State& s = *state_;
  for (nn::Parameter* p : params) {
    if (p->frozen) continue;
    s.params.push_back(p);
    s.total += p->value.size();
  }
  const nn::Device device = s.params.empty() ? nn::Device::kHost : s.params.front()->value.device();
  s.shard = gpulab::dist::shard_of(s.total, comm.size(), comm.rank());
  s.flat_grads = nn::Tensor(1, s.total, device);
  s.flat_values = nn::Tensor(1, s.total, device);
  s.mine.name = "shard " + std::to_string(comm.rank());
  s.mine.value = nn::Tensor(1, s.shard.count, device);
  s.mine.grad = nn::Tensor(1, s.shard.count, device);
}

ZeroAdamW::~ZeroAdamW() = default;

std::size_t ZeroAdamW::state_floats() const { return state_->adam.state_floats_per_parameter() * state_->mine.value.size(); }

void ZeroAdamW::step() {
  State& s = *state_;
  Communicator& comm = s.comm;
  // BEGIN SOLUTION(08.7) ZeRO-1: reduce-scatter, update your shard, all-gather
  // Flatten: gradients (zeros for a parameter without one) and values, end to end.
  std::size_t offset = 0;
  for (nn::Parameter* p : s.params) {
    if (p->grad.empty()) p->grad = nn::Tensor(p->value.rows(), p->value.cols(), p->value.device());
    comm.copy(s.flat_grads.data() + offset, p->grad.data(), p->value.size());
    comm.copy(s.flat_values.data() + offset, p->value.data(), p->value.size());
    offset += p->value.size();
  }
  // Our shard of the summed gradient, averaged; our shard of the values.
  CollectiveRequest scatter = comm.ireduce_scatter_sum(s.flat_grads.data(), s.mine.grad.data(), s.total, "reduce-scatter");
  comm.wait(scatter);
  nn::scale(s.mine.grad, 1.0f / static_cast<float>(comm.size()));
  comm.copy(s.mine.value.data(), s.flat_values.data() + s.shard.offset, s.shard.count);
  s.adam.step({&s.mine});
  // Everyone's updated shard, then back into the parameters.
  CollectiveRequest gather = comm.iall_gather(s.mine.value.data(), s.flat_values.data(), s.total, "all-gather");
  comm.wait(gather);
  offset = 0;
  for (nn::Parameter* p : s.params) {
    comm.copy(p->value.data(), s.flat_values.data() + offset, p->value.size());
    offset += p->value.size();
  }
  // END SOLUTION
}

}  // namespace lab08
