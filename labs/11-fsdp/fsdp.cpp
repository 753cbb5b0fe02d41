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

// TODO(11.2): The gradient leaves as a reduce-scatter into the shard; AdamW on the real floats of every shard
// See lessons/11-fsdp.md, section "TODO(11.2)".
void ShardedGPT::reduce_gradient(std::size_t k) {
  (void)k;  // delete once you use it
}

void ShardedGPT::finish_gradient(std::size_t k) {
  (void)k;  // delete once you use it
}

void ShardedGPT::optimizer_step() {
}

// TODO(11.3): Gather just in time, view the parameters into the full buffer, reshard right after forward
// See lessons/11-fsdp.md, section "TODO(11.3)".
void ShardedGPT::unshard(std::size_t k) {
  (void)k;  // delete once you use it
}

void ShardedGPT::wait_unshard(std::size_t k) {
  (void)k;  // delete once you use it
}

void ShardedGPT::reshard(std::size_t k) {
  (void)k;  // delete once you use it
}

nn::Tensor ShardedGPT::forward(const nn::TokenBatch& batch) {
  (void)batch;  // delete once you use it
  return {};
}

// TODO(11.4): Backward: gather again, reduce-scatter each unit's gradient, reshard
// See lessons/11-fsdp.md, section "TODO(11.4)".
void ShardedGPT::backward(const nn::TokenBatch& batch, const nn::Tensor& dlogits) {
  (void)batch; (void)dlogits;  // delete once you use them
}

// TODO(11.5): Post the next units' gathers, never more than the limit ahead
// See lessons/11-fsdp.md, section "TODO(11.5)".
void ShardedGPT::prefetch(const std::vector<std::size_t>& order, std::size_t i) {
  (void)order; (void)i;  // delete once you use them
}

}  // namespace lab11
