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
  // TODO(08.7): ZeRO-1: reduce-scatter, update your shard, all-gather
  // See lessons/08-data-parallel.md, section "TODO(08.7)".
}

}  // namespace lab08
