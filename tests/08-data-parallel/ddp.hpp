/// @file ddp.hpp
/// @brief Lab 08 — data-parallel training: the functions and classes you implement in
/// labs/08-data-parallel/ (sampler.cpp, ddp.cpp, zero.cpp). Read lessons/08-data-parallel.md.
///
/// This header belongs to the tests: do not change it. W ranks each hold a full copy of a
/// gpulab::nn model (common/include/gpulab/nn.hpp), train on their own shard of every batch, and
/// average their gradients before each optimizer step, so that all copies stay identical.
/// Communication goes through a gpulab::dist::Communicator (common/include/gpulab/dist.hpp):
/// its library collectives iallreduce_sum, ireduce_scatter_sum, iall_gather (non-blocking; wait
/// for each), progress(), and copy() between buffers of its memory. Calling MPI or NCCL
/// yourself fails the lab: the Communicator's traffic counts and timeline are what the tests read.
///
/// Averaging, precisely: sum over ranks (the Communicator sums in rank order), then multiply by
/// 1/W with nn::scale(tensor, 1.0f / W). (x / 3 and x · (1/3) can differ in the last bit; the
/// tests compare bit for bit against one process that does exactly this.)
///
/// Which parameters take part: a frozen one (Parameter::frozen) never does; every other one
/// does, and one whose grad is still empty (unused in every backward so far) counts as zeros
/// (give it a zero gradient of its value's shape, nn::Tensor(rows, cols, device)).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "gpulab/dist.hpp"
#include "gpulab/nn.hpp"

namespace lab08 {

namespace nn = gpulab::nn;
using gpulab::dist::Communicator;

/// TODO(08.1): the sample indices rank @p rank of @p world trains on in epoch @p epoch, as
/// PyTorch's DistributedSampler (shuffle on) with our generator:
///   1. indices = 0 … n − 1, shuffled by Fisher–Yates with gpulab::Rng rng(seed + epoch):
///      for i = n − 1 down to 1: j = rng.integer(0, i); swap(indices[i], indices[j]);
///   2. total = W·⌊n/W⌋ with @p drop_last (the list is cut to it), else W·⌈n/W⌉ (the list is
///      padded with its own first elements, again from the start if n is smaller than the pad);
///   3. this rank takes indices[rank], indices[rank + W], indices[rank + 2W], … (total / W).
/// Throws std::invalid_argument unless world ≥ 1 and 0 ≤ rank < world.
std::vector<std::size_t> distributed_sampler(std::size_t n, int world, int rank, std::uint64_t seed, int epoch, bool drop_last);

/// TODO(08.2): naive DDP, after backward: one all-reduce per parameter, in the order of
/// @p params, each waited for, then the gradient scaled by 1/W.
void allreduce_each(Communicator& comm, const std::vector<nn::Parameter*>& params);

/// TODO(08.3): flat DDP, after backward: every gradient copied into one flat buffer (in the
/// order of @p params), one all-reduce, scaled by 1/W, copied back.
void allreduce_flat(Communicator& comm, const std::vector<nn::Parameter*>& params);

/// TODO(08.4): PyTorch's bucket assignment (compute_bucket_assignment_by_size): walk the
/// parameters from the last to the first (the order backward finishes them), adding each to
/// the open bucket; close the bucket as soon as its size is ≥ its limit, which is
/// @p first_bucket_bytes for the first bucket and @p bucket_cap_bytes for every later one (so a
/// bucket can exceed its limit by its last parameter); a bucket still open at the end is closed.
/// @p bytes[i] is parameter i's gradient size. Returns the buckets in order, each a list of
/// parameter indices in the order they were added (bucket 0 holds the last parameters).
std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& bytes, std::size_t first_bucket_bytes,
                                                     std::size_t bucket_cap_bytes);

/// Gradient bucketing with communication overlapped with backward (PyTorch DDP's Reducer).
/// Give it the model's parameters; call grad_ready from the model's gradient-ready hook and
/// backward_done from its end-of-backward callback (nn::Sequential::backward's two hooks).
/// After backward_done every gradient is the average over ranks.
class Reducer {
 public:
  /// Buckets of the non-frozen @p params (assign_buckets over their gradient bytes).
  Reducer(Communicator& comm, std::vector<nn::Parameter*> params, std::size_t first_bucket_bytes = std::size_t{1} << 20,
          std::size_t bucket_cap_bytes = std::size_t{25} << 20);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  /// TODO(08.5): the gradient-ready hook. Once every parameter of a bucket is ready, the
  /// bucket is ready; launch ready buckets (copy their gradients into the bucket's flat buffer,
  /// start a non-blocking all-reduce) strictly in bucket order, so that every rank starts the
  /// same collectives in the same order: bucket k + 1 waits for bucket k. Never wait here (that
  /// would stop backward until the all-reduce ends); do call comm.progress().
  void grad_ready(nn::Parameter& param);
  /// TODO(08.6): the end of backward: launch every bucket not launched yet (parameters that got
  /// no hook count as zeros), wait for all, scale by 1/W, copy back into the gradients, and get
  /// ready for the next backward. With sync off (no_sync), grad_ready and backward_done do
  /// nothing: gradients accumulate locally until the next backward with sync on.
  void backward_done();
  /// no_sync: false for the micro-batches of a gradient accumulation before the last.
  void set_sync(bool sync);
  /// The buckets, as indices into the constructor's @p params (frozen ones are in none).
  std::vector<std::vector<std::size_t>> buckets() const;

  struct State;  ///< the reducer's state (defined in ddp.cpp)

 private:
  std::unique_ptr<State> state_;
};

/// ZeRO stage 1 (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion
/// Parameter Models", 2020): the gradients are reduce-scattered, each rank keeps the AdamW
/// moments of its own shard only and updates that shard, and the parameters are all-gathered.
/// The flat layout: the non-frozen parameters in order, concatenated; rank r owns
/// gpulab::dist::shard_of(total, W, r) of it (the Communicator's reduce-scatter layout).
class ZeroAdamW {
 public:
  /// AdamW over the non-frozen @p params, with nn::AdamW's hyper-parameters.
  ZeroAdamW(Communicator& comm, std::vector<nn::Parameter*> params, float lr, float beta1 = 0.9f, float beta2 = 0.999f, float eps = 1e-8f,
            float weight_decay = 0.01f);
  ~ZeroAdamW();
  ZeroAdamW(const ZeroAdamW&) = delete;
  ZeroAdamW& operator=(const ZeroAdamW&) = delete;

  /// TODO(08.7): one step, from the local (not yet averaged) gradients: flatten them,
  /// reduce-scatter (sum), scale this rank's shard by 1/W, one nn::AdamW step on the shard (a
  /// Parameter whose value is this rank's shard of the flat parameters and whose grad is the
  /// averaged shard), all-gather the updated flat parameters, copy them back into every
  /// parameter. Afterwards the parameters equal those of a plain nn::AdamW step on averaged
  /// gradients, bit for bit.
  void step();
  /// Floats of optimizer state this rank holds: 2 × its shard (m and v), not 2 × all.
  std::size_t state_floats() const;

  struct State;  ///< the optimizer's state (defined in zero.cpp)

 private:
  std::unique_ptr<State> state_;
};

}  // namespace lab08
