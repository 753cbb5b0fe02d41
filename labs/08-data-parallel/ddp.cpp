/// @file ddp.cpp
/// @brief Lab 08 — averaging gradients across ranks three ways: one all-reduce per parameter,
/// one over a flat buffer, and buckets launched during backward (PyTorch DDP's Reducer). Read
/// lessons/08-data-parallel.md.
///
/// Napkin math: P parameters are 4P bytes of gradient; an all-reduce moves 2(W − 1)/W · 4P bytes
/// per rank, which costs α per message plus bytes/β. Backward is ≈ 4·P·B FLOPs. Naive pays α once
/// per parameter and hides nothing; flat pays α once and hides nothing; buckets pay α per bucket
/// and hide all but the last bucket's transfer behind the backward of the earlier layers.
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ddp.hpp"

namespace lab08 {

using gpulab::dist::CollectiveRequest;

namespace {

/// A parameter's gradient, zeros if it has none yet (an unused parameter counts as zeros).
nn::Tensor& gradient_of(nn::Parameter& p) {
  if (p.grad.empty()) p.grad = nn::Tensor(p.value.rows(), p.value.cols(), p.value.device());
  return p.grad;
}

}  // namespace

void allreduce_each(Communicator& comm, const std::vector<nn::Parameter*>& params) {
  // TODO(08.2): Naive DDP: one all-reduce per gradient, then the average
  // See lessons/08-data-parallel.md, section "TODO(08.2)".
}

void allreduce_flat(Communicator& comm, const std::vector<nn::Parameter*>& params) {
  // TODO(08.3): Flat DDP: all gradients in one buffer, one all-reduce
  // See lessons/08-data-parallel.md, section "TODO(08.3)".
}

std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& bytes, std::size_t first_bucket_bytes,
                                                     std::size_t bucket_cap_bytes) {
  // TODO(08.4): Buckets by size, from the last parameter to the first
  // See lessons/08-data-parallel.md, section "TODO(08.4)".
  return {};
}

// ---------------------------------------------------------------------------------------------
// The Reducer
// ---------------------------------------------------------------------------------------------

/// What the reducer keeps between hooks: the buckets, each with a flat buffer in the
/// parameters' memory, how many of its gradients are still to come in this backward, and its
/// all-reduce once launched.
struct Reducer::State {
  explicit State(Communicator& c) : comm(c) {}
  Communicator& comm;
  std::vector<nn::Parameter*> params;                   ///< the constructor's list
  std::map<const nn::Parameter*, std::size_t> index_of;  ///< param → index into params
  std::vector<std::vector<std::size_t>> buckets;        ///< indices into params, in launch order
  std::vector<int> bucket_of;                           ///< per parameter: its bucket, −1 if frozen
  std::vector<nn::Tensor> flat;                         ///< per bucket: its gradients, end to end
  std::vector<std::size_t> missing;                     ///< per bucket: gradients not ready yet
  std::vector<bool> ready;                              ///< per parameter: hooked in this backward
  std::vector<CollectiveRequest> requests;              ///< per bucket: its all-reduce
  std::size_t launched = 0;                             ///< buckets [0, launched) are in flight
  bool sync = true;
};

namespace {

/// Starts bucket @p b's all-reduce: its gradients (zeros for those not ready) copied end to end.
void launch(Reducer::State& s, std::size_t b) {
  std::size_t offset = 0;
  for (std::size_t i : s.buckets[b]) {
    nn::Parameter& p = *s.params[i];
    if (!s.ready[i]) gradient_of(p).fill(0.0f);  // unused in this backward: zeros
    s.comm.copy(s.flat[b].data() + offset, gradient_of(p).data(), p.value.size());
    offset += p.value.size();
  }
  s.requests[b] = s.comm.iallreduce_sum(s.flat[b].data(), s.flat[b].size(), "bucket " + std::to_string(b));
}

}  // namespace

Reducer::Reducer(Communicator& comm, std::vector<nn::Parameter*> params, std::size_t first_bucket_bytes, std::size_t bucket_cap_bytes)
    : state_(std::make_unique<State>(comm)) {
  State& s = *state_;
  s.params = std::move(params);
  std::vector<std::size_t> members, bytes;
  for (std::size_t i = 0; i < s.params.size(); ++i) {
    s.index_of[s.params[i]] = i;
    if (s.params[i]->frozen) continue;
    members.push_back(i);
    bytes.push_back(s.params[i]->value.size() * sizeof(float));
  }
  s.bucket_of.assign(s.params.size(), -1);
  for (const std::vector<std::size_t>& bucket : assign_buckets(bytes, first_bucket_bytes, bucket_cap_bytes)) {
    std::vector<std::size_t> indices;
    std::size_t floats = 0;
    for (std::size_t k : bucket) {
      if (k >= members.size() || s.bucket_of[members[k]] != -1) throw std::invalid_argument("assign_buckets: every parameter must be in exactly one bucket");
      s.bucket_of[members[k]] = static_cast<int>(s.buckets.size());
      indices.push_back(members[k]);
      floats += s.params[members[k]]->value.size();
    }
    s.buckets.push_back(indices);
    s.flat.emplace_back(1, floats, s.params[indices.front()]->value.device());
    s.missing.push_back(indices.size());
  }
  for (std::size_t i : members) {
    if (s.bucket_of[i] == -1) throw std::invalid_argument("assign_buckets: every parameter must be in exactly one bucket");
  }
  s.ready.assign(s.params.size(), false);
  s.requests.resize(s.buckets.size());
}

Reducer::~Reducer() = default;

void Reducer::set_sync(bool sync) { state_->sync = sync; }

std::vector<std::vector<std::size_t>> Reducer::buckets() const { return state_->buckets; }

void Reducer::grad_ready(nn::Parameter& param) {
  State& s = *state_;
  // TODO(08.5): A bucket launches when its last gradient is ready, in bucket order
  // See lessons/08-data-parallel.md, section "TODO(08.5)".
}

void Reducer::backward_done() {
  State& s = *state_;
  // TODO(08.6): Flush what is left, wait for every bucket, average, copy back
  // See lessons/08-data-parallel.md, section "TODO(08.6)".
}

}  // namespace lab08
