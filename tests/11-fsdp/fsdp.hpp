/// @file fsdp.hpp
/// @brief Lab 11 — fully sharded data parallelism (ZeRO-2 and ZeRO-3, PyTorch's FSDP): the
/// functions you implement in labs/11-fsdp/ (flat.cpp, fsdp.cpp). Read lessons/11-fsdp.md.
///
/// This header belongs to the tests: do not change it. W ranks train one gpulab::nn::GPT
/// (common/include/gpulab/nn_gpt.hpp) on their own batches, as lab 08's data parallelism does,
/// but no rank keeps the whole model: each keeps a 1/W shard of every parameter, of its
/// gradient and of AdamW's moments (Rajbhandari et al., "ZeRO: Memory Optimizations Toward
/// Training Trillion Parameter Models", 2020; Zhao et al., "PyTorch FSDP", 2023).
///
/// Units. The model's parameters are grouped into flat units, each flattened into one buffer:
///   unit 0, "root": wte.weight, wpe.weight, ln_f.weight, ln_f.bias — the embeddings and the head,
///     which share the token table (tied), so the root is gathered from the embeddings' forward
///     to their backward (FSDP's rule: a parameter two pieces of compute share lives in one unit
///     that outlives both);
///   unit k = 1 … L, "h.(k−1)": block k − 1's twelve parameters.
/// Compute unit u of the GPT (GPT::forward's units: 0 the embeddings, 1 … L the blocks, L + 1 ln_f
/// and the head) needs flat unit u, or the root for u = L + 1.
///
/// The flat layout (11.1): a unit's parameters end to end in their order, then zeros up to a
/// multiple of W (padded), so that every rank's shard is the same size (padded / W floats:
/// rank r holds [r·shard, (r + 1)·shard), which is the Communicator's shard_of layout). The
/// padding is never a parameter: no optimizer state, no update.
///
/// Arithmetic. The Communicator sums in rank order; the tests compare bit for bit against one
/// process that computes each rank's gradient with the same model, sums them in rank order,
/// scales the sum by 1/W (nn::scale(t, 1.0f / W)) and runs nn::AdamW on fp32 values. With bf16
/// compute (11.6), that process runs each forward and backward on round_to_bf16 of its fp32
/// values, as your ranks run on round_to_bf16 of the gathered fp32 shards.
///
/// Communication goes through the Communicator's non-blocking ireduce_scatter_sum and
/// iall_gather (wait for each); every all-gather and reduce-scatter of a unit carries the unit's
/// name as its label ("root", "h.3"): the tests and the timeline read them. Nothing else may move
/// data (an all-reduce, though it links, is counted against you: it sends twice a reduce-scatter's
/// bytes and leaves every rank the whole gradient).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpulab/dist.hpp"
#include "gpulab/nn.hpp"
#include "gpulab/nn_gpt.hpp"

namespace lab11 {

namespace nn = gpulab::nn;
using gpulab::dist::Communicator;

// ---------------------------------------------------------------------------------------------
// 11.1 flat units
// ---------------------------------------------------------------------------------------------

/// Where a unit's parameters live in its flat buffer, and how the buffer is sharded.
struct FlatLayout {
  std::vector<std::size_t> offsets;  ///< the first float of each parameter, in order
  std::size_t numel = 0;             ///< real floats: every parameter's size, summed
  std::size_t padded = 0;            ///< numel rounded up to a multiple of W (≥ W)
  std::size_t shard = 0;             ///< padded / W: every rank's shard, in floats
};

/// TODO(11.1): the flat layout of @p params over @p world ranks. A unit smaller than W floats is
/// handled (padded to W: some ranks hold only padding). Throws std::invalid_argument, naming
/// the parameter, for a frozen one (FSDP here flattens only what it trains) and for one listed
/// twice (a parameter shared by two pieces of the model belongs in one unit); also for world < 1
/// or no parameters.
FlatLayout flat_layout(const std::vector<nn::Parameter*>& params, int world);

/// TODO(11.1): the real floats of rank @p rank's shard: [offset, offset + count) of the flat
/// buffer, the part of [rank·shard, (rank + 1)·shard) below numel (count 0 for a shard of
/// padding only; offset is then min(rank·shard, numel)).
gpulab::dist::Shard real_part(const FlatLayout& layout, int rank);

/// TODO(11.1): points every parameter's value (or, with @p grads, its grad) at its place in
/// @p flat (1 × padded): an nn::Tensor::view of the parameter's own rows × cols at its offset.
/// The shapes come from @p shapes (rows, cols per parameter), since a resharded parameter's
/// tensors are empty. Throws std::invalid_argument when flat is not 1 × layout.padded.
void view_into(const std::vector<nn::Parameter*>& params,
               const std::vector<std::pair<std::size_t, std::size_t>>& shapes,
               const FlatLayout& layout, nn::Tensor& flat, bool grads);

// ---------------------------------------------------------------------------------------------
// 11.6 bf16 (given here as a declaration; yours in flat.cpp)
// ---------------------------------------------------------------------------------------------

/// TODO(11.6): @p x rounded to the nearest bfloat16 (8 exponent bits, 7 stored mantissa bits)
/// and back to float, ties to even; NaN stays NaN, ±inf stays, a value that rounds past the
/// largest bf16 becomes ±inf. (Lab 04's conversion, without the 16-bit storage.)
float round_to_bf16(float x);

// ---------------------------------------------------------------------------------------------
// The sharded model
// ---------------------------------------------------------------------------------------------

/// How the model is sharded.
struct FsdpOptions {
  int stage = 3;     ///< 2: ZeRO-2 (every rank keeps the whole parameters); 3: ZeRO-3 (only shards)
  int prefetch = 1;  ///< ZeRO-3: all-gathers posted ahead of the unit that computes (0: none)
  bool bf16_compute = false;  ///< compute on round_to_bf16 copies of the gathered fp32 parameters
  float lr = 1e-3f;           ///< AdamW's hyper-parameters (nn::AdamW's meaning)
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.01f;
};

/// One flat unit on this rank.
struct FlatUnit {
  std::string name;                    ///< "root", "h.0", "h.1", …: the label of its collectives
  std::vector<nn::Parameter*> params;  ///< its parameters, in the model's order
  std::vector<std::pair<std::size_t, std::size_t>> shapes;  ///< each parameter's rows × cols
  FlatLayout layout;
  nn::Tensor shard;       ///< 1 × layout.shard: this rank's fp32 master values (padding: 0)
  nn::Tensor grad_shard;  ///< 1 × layout.shard: this step's averaged gradient (padding: 0)
  nn::Parameter
      master;  ///< what AdamW steps: value and grad view the real part of shard and grad_shard
  nn::Tensor
      full;  ///< 1 × layout.padded while gathered (the parameters' values view it), else empty
  nn::Tensor full_grad;  ///< 1 × layout.padded from the unit's backward until its reduce-scatter
                         ///< ends, else empty
  gpulab::dist::CollectiveRequest gather;   ///< the all-gather into full, while in flight
  gpulab::dist::CollectiveRequest scatter;  ///< the reduce-scatter from full_grad, while in flight
};

/// One piece of compute, for the timeline (recorded by forward_unit and backward_unit).
struct ComputeSpan {
  std::size_t unit = 0;           ///< the GPT's compute unit (0 … L + 1)
  bool backward = false;          ///< backward (else forward)
  double start = 0.0, end = 0.0;  ///< gpulab::dist::now()
};

/// A GPT trained with ZeRO-2 or ZeRO-3 over the ranks of a Communicator, on the host or the GPU
/// (the model's device and the Communicator's memory must agree; the same code runs on both).
class ShardedGPT {
 public:
  /// Shards @p model, which every rank made alike (same config and seed): the units (above), their
  /// layouts (flat_layout), this rank's shard of each copied from the model's values; then the
  /// model's own parameter memory is given back (every value and grad empty). ZeRO-2 gathers every
  /// unit once here (it keeps them whole); ZeRO-3 gathers nothing until forward. Every buffer
  /// lives on the model's device. Throws std::invalid_argument for a stage other than 2 or 3, a
  /// negative prefetch, a model on another device than the Communicator's memory, or what
  /// flat_layout refuses. (Given.)
  ShardedGPT(Communicator& comm, nn::GPT& model, const FsdpOptions& options);
  /// Leaves no parameter viewing a buffer that goes with it. (Given.)
  ~ShardedGPT() {
    for (FlatUnit& u : units_) {
      for (nn::Parameter* p : u.params) {
        if (p->value.is_view()) p->value = nn::Tensor();
        if (p->grad.is_view()) p->grad = nn::Tensor();
      }
    }
  }
  ShardedGPT(const ShardedGPT&) = delete;
  ShardedGPT& operator=(const ShardedGPT&) = delete;

  /// One training step on this rank's @p batch (its own sequences) and next-token @p targets:
  /// forward, the mean cross-entropy over this rank's rows, backward, optimizer_step. Returns
  /// this rank's loss. (Given.)
  double step(const nn::TokenBatch& batch, const std::vector<int>& targets) {
    spans_.clear();
    nn::Tensor logits = forward(batch);
    nn::Tensor dlogits;
    const double loss = nn::softmax_cross_entropy(logits, targets, &dlogits);
    logits = nn::Tensor();
    backward(batch, dlogits);
    optimizer_step();
    return loss;
  }

  /// TODO(11.2): the gradient of flat unit @p k, computed into full_grad, leaves: post its
  /// reduce-scatter (sum) into grad_shard. Non-blocking.
  void reduce_gradient(std::size_t k);
  /// TODO(11.2): completes unit @p k's reduce-scatter: wait, scale grad_shard by 1/W, give
  /// full_grad back and empty the parameters' grads.
  void finish_gradient(std::size_t k);
  /// TODO(11.2): AdamW on every unit's master (the real floats only), then, with ZeRO-2, every
  /// unit gathered again (its parameters' new values). The shards stay fp32.
  void optimizer_step();

  /// TODO(11.3): posts the all-gather of unit @p k's shard into its full buffer, made first when
  /// it has none (ZeRO-3 after a reshard; ZeRO-2 gathers again into the one it keeps), without
  /// waiting. The caller decides whether the unit needs a gather (one neither gathered nor in
  /// flight): unshard always posts.
  void unshard(std::size_t k);
  /// TODO(11.3): waits for unit @p k's all-gather, points its parameters' values at full
  /// (view_into) and, with bf16 compute, rounds full (round_compute_copy).
  void wait_unshard(std::size_t k);
  /// TODO(11.3): unit @p k back to its shard: the parameters' values emptied, full given back.
  void reshard(std::size_t k);
  /// TODO(11.3): forward through every compute unit (forward_unit), each flat unit gathered just
  /// before it is needed and, ZeRO-3, resharded right after (the root: after backward). Returns
  /// the logits.
  nn::Tensor forward(const nn::TokenBatch& batch);

  /// TODO(11.4): backward from @p dlogits through every compute unit in reverse
  /// (backward_unit), each flat unit's gradient into a fresh full_grad (its parameters' grads
  /// view it), reduce-scattered as soon as the unit's backward ends; ZeRO-3 gathers each block
  /// again for its backward and reshards it after. At most two full gradients of blocks live at
  /// once (finish a block's reduce-scatter before the backward of the block after next), and every
  /// reduce-scatter is finished before it returns.
  void backward(const nn::TokenBatch& batch, const nn::Tensor& dlogits);

  /// TODO(11.5): prefetch: of the units at positions i + 1 … i + options().prefetch of @p order,
  /// posts the all-gathers of those neither gathered nor in flight (ZeRO-3 only; never waits).
  void prefetch(const std::vector<std::size_t>& order, std::size_t i);

  /// TODO(11.6): with bf16 compute, unit @p k's full buffer rounded in place by round_to_bf16
  /// (the shard, the master, stays fp32); else nothing.
  void round_compute_copy(FlatUnit& unit);

  /// Runs compute unit @p u forward (GPT::forward over [u, u + 1)) from @p x (ignored for u = 0)
  /// and records it. Throws std::logic_error when a parameter the unit needs is resharded.
  /// (Given.)
  nn::Tensor forward_unit(std::size_t u, const nn::TokenBatch& batch, const nn::Tensor& x) {
    require_gathered(u, "forward");
    if (watch) watch(u, false);
    const double start = gpulab::dist::now();
    nn::Tensor y = model_.forward(batch, saved_, u, u + 1, x);
    spans_.push_back({u, false, start, gpulab::dist::now()});
    return y;
  }
  /// Runs compute unit @p u backward from @p dy, gives back the activations its forward kept, and
  /// records it; returns dL/d(its input) (empty for u = 0). Throws std::logic_error when a
  /// parameter it needs is resharded. (Given.)
  nn::Tensor backward_unit(std::size_t u, const nn::TokenBatch& batch, const nn::Tensor& dy) {
    require_gathered(u, "backward");
    if (watch) watch(u, true);
    const double start = gpulab::dist::now();
    nn::Tensor dx = model_.backward(batch, dy, saved_, {}, {}, u, u + 1);
    saved_.at(u).clear();  // its activations are spent
    spans_.push_back({u, true, start, gpulab::dist::now()});
    return dx;
  }

  /// The flat unit compute unit @p u needs: u for u ≤ L, 0 (the root) for u = L + 1. (Given.)
  std::size_t flat_unit_of(std::size_t u) const { return u == units_.size() ? 0 : u; }
  /// Flat units, in order (root, h.0, …).
  std::vector<FlatUnit>& units() { return units_; }
  /// Compute units of the GPT: L + 2.
  std::size_t compute_units() const { return units_.size() + 1; }
  const FsdpOptions& options() const { return options_; }
  /// Where every buffer lives: the model's device.
  nn::Device device() const { return model_.device(); }
  Communicator& comm() { return comm_; }
  /// This step's compute, in order.
  const std::vector<ComputeSpan>& spans() const { return spans_; }
  /// The tests' probe: called with (compute unit, backward) as each compute unit starts, after its
  /// parameters are checked. (Given; yours to leave alone.)
  std::function<void(std::size_t, bool)> watch;

 private:
  void require_gathered(std::size_t u, const char* pass) const {
    const FlatUnit& unit = units_.at(flat_unit_of(u));
    for (const nn::Parameter* p : unit.params) {
      if (p->value.empty()) {
        throw std::logic_error(
            std::string(pass) + " of compute unit " + std::to_string(u) + " needs " + p->name +
            " of flat unit " + unit.name + ", which is resharded" +
            (u + 1 == compute_units()
                 ? " (the head shares the token table with the embeddings: the root stays gathered "
                   "from the embeddings' forward to their backward)"
                 : ""));
      }
    }
  }
  Communicator& comm_;
  nn::GPT& model_;
  FsdpOptions options_;
  nn::AdamW adam_;
  std::vector<FlatUnit> units_;
  std::vector<nn::Saved> saved_;
  std::vector<ComputeSpan> spans_;
};

/// The constructor (given): units, layouts, shards, the model's memory given back.
inline ShardedGPT::ShardedGPT(Communicator& comm, nn::GPT& model, const FsdpOptions& options)
    : comm_(comm),
      model_(model),
      options_(options),
      adam_(options.lr, options.beta1, options.beta2, options.eps, options.weight_decay) {
  if (options.stage != 2 && options.stage != 3)
    throw std::invalid_argument("ShardedGPT: stage " + std::to_string(options.stage) + " (2 or 3)");
  if (options.prefetch < 0)
    throw std::invalid_argument("ShardedGPT: prefetch " + std::to_string(options.prefetch) +
                                " (0 or more)");
  std::vector<nn::Parameter*> all = model.parameters();
  const std::size_t L = model.config().layers;
  units_.resize(L + 1);
  units_[0].name = "root";
  units_[0].params = {all[0], all[1], all[all.size() - 2], all[all.size() - 1]};
  for (std::size_t k = 1; k <= L; ++k) {
    units_[k].name = "h." + std::to_string(k - 1);
    units_[k].params.assign(all.begin() + static_cast<long>(2 + 12 * (k - 1)),
                            all.begin() + static_cast<long>(2 + 12 * k));
  }
  const int w = comm.size(), r = comm.rank();
  const nn::Device device = model.device();
  if ((device == nn::Device::kGpu) != (comm.memory() == gpulab::dist::Memory::kDevice)) {
    throw std::invalid_argument(std::string("ShardedGPT: the model is on the ") +
                                nn::to_string(device) + ", the Communicator's buffers are not");
  }
  for (FlatUnit& u : units_) {
    for (nn::Parameter* p : u.params)
      u.shapes.emplace_back(p->value.rows(), p->value.cols());
    u.layout = flat_layout(u.params, w);
    if (u.layout.padded != u.layout.shard * static_cast<std::size_t>(w) ||
        u.layout.offsets.size() != u.params.size() || u.layout.padded < u.layout.numel) {
      throw std::logic_error("flat_layout for unit " + u.name + ": " +
                             std::to_string(u.layout.padded) + " padded floats in shards of " +
                             std::to_string(u.layout.shard) + " over " + std::to_string(w) +
                             " ranks, " + std::to_string(u.layout.numel) + " real");
    }
    // This rank's shard: the floats of [r·shard, (r + 1)·shard) that parameters cover; padding 0.
    u.shard = nn::Tensor(1, u.layout.shard, device);
    u.grad_shard = nn::Tensor(1, u.layout.shard, device);
    const std::size_t begin = static_cast<std::size_t>(r) * u.layout.shard,
                      end = begin + u.layout.shard;
    for (std::size_t i = 0; i < u.params.size(); ++i) {
      const std::size_t at = u.layout.offsets[i], n = u.params[i]->value.size();
      const std::size_t lo = std::max(at, begin), hi = std::min(at + n, end);
      if (lo < hi)
        comm.copy(u.shard.data() + (lo - begin), u.params[i]->value.data() + (lo - at), hi - lo);
    }
    const gpulab::dist::Shard real = real_part(u.layout, r);
    u.master.name = u.name + " shard " + std::to_string(r);
    if (real.count > 0 && real.offset >= begin && real.offset + real.count <= end) {
      u.master.value =
          nn::Tensor::view(u.shard.data() + (real.offset - begin), 1, real.count, device);
      u.master.grad =
          nn::Tensor::view(u.grad_shard.data() + (real.offset - begin), 1, real.count, device);
    }
  }
  for (nn::Parameter* p :
       all) {  // the model's own copies go: from here on the shards are the parameters
    p->value = nn::Tensor();
    p->grad = nn::Tensor();
  }
  if (options.stage == 2) {
    for (std::size_t k = 0; k < units_.size(); ++k)
      unshard(k);
    for (std::size_t k = 0; k < units_.size(); ++k)
      wait_unshard(k);
  }
}

}  // namespace lab11
