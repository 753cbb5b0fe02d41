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
  // BEGIN SOLUTION(08.2) Naive DDP: one all-reduce per gradient, then the average
  for (nn::Parameter* p : params) {
    if (p->frozen) continue;
    nn::Tensor& g = gradient_of(*p);
    CollectiveRequest request = comm.iallreduce_sum(g.data(), g.size(), p->name);
    comm.wait(request);
    nn::scale(g, 1.0f / static_cast<float>(comm.size()));
  }
  // END SOLUTION
}

void allreduce_flat(Communicator& comm, const std::vector<nn::Parameter*>& params) {
  // BEGIN SOLUTION(08.3) Flat DDP: all gradients in one buffer, one all-reduce
  std::size_t total = 0;
  for (nn::Parameter* p : params) total += p->frozen ? 0 : p->value.size();
  if (total == 0) return;
  nn::Tensor flat(1, total, params.front()->value.device());
  std::size_t offset = 0;
  for (nn::Parameter* p : params) {
    if (p->frozen) continue;
    comm.copy(flat.data() + offset, gradient_of(*p).data(), p->value.size());
    offset += p->value.size();
  }
  CollectiveRequest request = comm.iallreduce_sum(flat.data(), total, "flat");
  comm.wait(request);
  nn::scale(flat, 1.0f / static_cast<float>(comm.size()));
  offset = 0;
  for (nn::Parameter* p : params) {
    if (p->frozen) continue;
    comm.copy(p->grad.data(), flat.data() + offset, p->value.size());
    offset += p->value.size();
  }
  // END SOLUTION
}

std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& bytes, std::size_t first_bucket_bytes,
                                                     std::size_t bucket_cap_bytes) {
  // BEGIN SOLUTION(08.4) Buckets by size, from the last parameter to the first
  std::vector<std::vector<std::size_t>> buckets;
  std::vector<std::size_t> open;
  std::size_t open_bytes = 0;
  for (std::size_t i = bytes.size(); i-- > 0;) {
    open.push_back(i);
    open_bytes += bytes[i];
    const std::size_t limit = buckets.empty() ? first_bucket_bytes : bucket_cap_bytes;
    if (open_bytes >= limit) {
      buckets.push_back(std::move(open));
      open.clear();
      open_bytes = 0;
    }
  }
  if (!open.empty()) buckets.push_back(std::move(open));
  return buckets;
  // STUB: return {};
  // END SOLUTION
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
  // BEGIN SOLUTION(08.5) A bucket launches when its last gradient is ready, in bucket order
  if (!s.sync) return;
  const auto found = s.index_of.find(&param);
  if (found == s.index_of.end() || s.bucket_of[found->second] < 0 || s.ready[found->second]) return;
  s.ready[found->second] = true;
  --s.missing[static_cast<std::size_t>(s.bucket_of[found->second])];
  // In bucket order only: every rank must start the same all-reduces in the same order.
  while (s.launched < s.buckets.size() && s.missing[s.launched] == 0) launch(s, s.launched++);
  s.comm.progress();  // no progress thread: MPI moves the launched buckets only inside MPI calls
  // END SOLUTION
}

void Reducer::backward_done() {
  State& s = *state_;
  // BEGIN SOLUTION(08.6) Flush what is left, wait for every bucket, average, copy back
  if (!s.sync) return;
  while (s.launched < s.buckets.size()) launch(s, s.launched++);  // unused parameters: zeros
  const float inverse = 1.0f / static_cast<float>(s.comm.size());
  for (std::size_t b = 0; b < s.buckets.size(); ++b) {
    s.comm.wait(s.requests[b]);
    nn::scale(s.flat[b], inverse);
    std::size_t offset = 0;
    for (std::size_t i : s.buckets[b]) {
      nn::Parameter& p = *s.params[i];
      s.comm.copy(p.grad.data(), s.flat[b].data() + offset, p.value.size());
      offset += p.value.size();
    }
    s.missing[b] = s.buckets[b].size();
  }
  s.ready.assign(s.params.size(), false);
  s.launched = 0;
  // END SOLUTION
}

}  // namespace lab08
