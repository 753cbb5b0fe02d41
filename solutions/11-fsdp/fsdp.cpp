/// @file fsdp.cpp
/// @brief Lab 11 — the sharded step: gradients reduce-scattered into shards (ZeRO-2), parameters
/// gathered just in time and resharded after use (ZeRO-3), the next unit's gather prefetched,
/// AdamW on fp32 master shards. Read lessons/11-fsdp.md, sections "TODO(11.2)" … "TODO(11.5)".
///
/// Napkin math, Ψ parameters, AdamW, fp32 (16 bytes per parameter: value, gradient, m, v):
///   ZeRO-1 (lab 08)  4Ψ + 4Ψ + 8Ψ/W          traffic 2·(W − 1)/W · 4Ψ per step
///   ZeRO-2           4Ψ + 12Ψ/W (+ a unit's gradient in flight)     the same traffic
///   ZeRO-3           16Ψ/W (+ the units gathered in flight)         3·(W − 1)/W · 4Ψ
/// ZeRO-3 pays one more all-gather per step (backward's) for dividing everything by W. (This lab
/// keeps each rank's fp32 shard in a buffer of its own, as mixed precision keeps fp32 masters
/// beside the 16-bit parameters: ZeRO-2 here holds 4Ψ + 16Ψ/W.)
#include <numeric>
#include <vector>

#include "fsdp.hpp"

namespace lab11 {

// BEGIN SOLUTION(11.2) The gradient leaves as a reduce-scatter into the shard; AdamW on the real floats of every shard
void ShardedGPT::reduce_gradient(std::size_t k) {
  FlatUnit& u = units_.at(k);
  u.scatter = comm_.ireduce_scatter_sum(u.full_grad.data(), u.grad_shard.data(), u.layout.padded, u.name);
}

void ShardedGPT::finish_gradient(std::size_t k) {
  FlatUnit& u = units_.at(k);
  comm_.wait(u.scatter);
  nn::scale(u.grad_shard, 1.0f / static_cast<float>(comm_.size()));
  for (nn::Parameter* p : u.params) p->grad = nn::Tensor();  // views of full_grad: drop them first
  u.full_grad = nn::Tensor();
}

void ShardedGPT::optimizer_step() {
  std::vector<nn::Parameter*> masters;
  for (FlatUnit& u : units_) {
    if (!u.master.value.empty()) masters.push_back(&u.master);  // a shard of padding only has none
  }
  adam_.step(masters);
  if (options_.stage == 2) {  // everyone's updated shards, into the whole parameters every rank keeps
    for (std::size_t k = 0; k < units_.size(); ++k) unshard(k);
    for (std::size_t k = 0; k < units_.size(); ++k) wait_unshard(k);
  }
}
// STUB: void ShardedGPT::reduce_gradient(std::size_t k) {
// STUB:   (void)k;  // delete once you use it
// STUB: }
// STUB:
// STUB: void ShardedGPT::finish_gradient(std::size_t k) {
// STUB:   (void)k;  // delete once you use it
// STUB: }
// STUB:
// STUB: void ShardedGPT::optimizer_step() {
// STUB: }
// END SOLUTION

// BEGIN SOLUTION(11.3) Gather just in time, view the parameters into the full buffer, reshard right after forward
void ShardedGPT::unshard(std::size_t k) {
  FlatUnit& u = units_.at(k);
  if (u.full.empty()) u.full = nn::Tensor::uninitialized(1, u.layout.padded, device());  // ZeRO-2 gathers into the one it keeps
  u.gather = comm_.iall_gather(u.shard.data(), u.full.data(), u.layout.padded, u.name);
}

void ShardedGPT::wait_unshard(std::size_t k) {
  FlatUnit& u = units_.at(k);
  if (u.gather.pending()) comm_.wait(u.gather);
  view_into(u.params, u.shapes, u.layout, u.full, false);
  round_compute_copy(u);
}

void ShardedGPT::reshard(std::size_t k) {
  FlatUnit& u = units_.at(k);
  for (nn::Parameter* p : u.params) p->value = nn::Tensor();  // the views go first, then the buffer
  u.full = nn::Tensor();
}

nn::Tensor ShardedGPT::forward(const nn::TokenBatch& batch) {
  const bool zero3 = options_.stage == 3;
  std::vector<std::size_t> order(units_.size());  // root (the embeddings), then the blocks
  std::iota(order.begin(), order.end(), std::size_t{0});
  nn::Tensor x;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::size_t k = order[i];
    if (zero3) {
      if (units_[k].full.empty()) unshard(k);
      prefetch(order, i);  // the next units' gathers travel while this one computes
      wait_unshard(k);
    }
    x = forward_unit(k, batch, x);
    if (zero3 && k != 0) reshard(k);  // the root stays: the head needs the token table, and backward too
  }
  return forward_unit(compute_units() - 1, batch, x);
}
// STUB: void ShardedGPT::unshard(std::size_t k) {
// STUB:   (void)k;  // delete once you use it
// STUB: }
// STUB:
// STUB: void ShardedGPT::wait_unshard(std::size_t k) {
// STUB:   (void)k;  // delete once you use it
// STUB: }
// STUB:
// STUB: void ShardedGPT::reshard(std::size_t k) {
// STUB:   (void)k;  // delete once you use it
// STUB: }
// STUB:
// STUB: nn::Tensor ShardedGPT::forward(const nn::TokenBatch& batch) {
// STUB:   (void)batch;  // delete once you use it
// STUB:   return {};
// STUB: }
// END SOLUTION

// BEGIN SOLUTION(11.4) Backward: gather again, reduce-scatter each unit's gradient, reshard
void ShardedGPT::backward(const nn::TokenBatch& batch, const nn::Tensor& dlogits) {
  const bool zero3 = options_.stage == 3;
  const auto open_gradient = [this](FlatUnit& u) {
    u.full_grad = nn::Tensor(1, u.layout.padded, device());  // zeros: backward adds into it
    view_into(u.params, u.shapes, u.layout, u.full_grad, true);
  };
  open_gradient(units_[0]);  // the head's share of the token table, then the embeddings'
  nn::Tensor dy = backward_unit(compute_units() - 1, batch, dlogits);
  std::vector<std::size_t> order;  // the blocks, last first
  for (std::size_t k = units_.size() - 1; k >= 1; --k) order.push_back(k);
  std::size_t in_flight = 0;  // the block whose reduce-scatter travels (0: none)
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::size_t k = order[i];
    if (zero3) {
      if (units_[k].full.empty()) unshard(k);
      prefetch(order, i);  // backward prefetch: the block before this one
      wait_unshard(k);
    }
    open_gradient(units_[k]);
    dy = backward_unit(k, batch, dy);
    reduce_gradient(k);
    if (zero3) reshard(k);
    if (in_flight != 0) finish_gradient(in_flight);  // at most two full gradients alive
    in_flight = k;
  }
  if (in_flight != 0) finish_gradient(in_flight);
  (void)backward_unit(0, batch, dy);
  reduce_gradient(0);
  if (zero3) reshard(0);
  finish_gradient(0);
}
// STUB: void ShardedGPT::backward(const nn::TokenBatch& batch, const nn::Tensor& dlogits) {
// STUB:   (void)batch; (void)dlogits;  // delete once you use them
// STUB: }
// END SOLUTION

// BEGIN SOLUTION(11.5) Post the next units' gathers, never more than the limit ahead
void ShardedGPT::prefetch(const std::vector<std::size_t>& order, std::size_t i) {
  if (options_.stage != 3) return;
  const std::size_t ahead = static_cast<std::size_t>(options_.prefetch);
  for (std::size_t j = i + 1; j < order.size() && j <= i + ahead; ++j) {
    if (units_[order[j]].full.empty()) unshard(order[j]);
  }
}
// STUB: void ShardedGPT::prefetch(const std::vector<std::size_t>& order, std::size_t i) {
// STUB:   (void)order; (void)i;  // delete once you use them
// STUB: }
// END SOLUTION

}  // namespace lab11
