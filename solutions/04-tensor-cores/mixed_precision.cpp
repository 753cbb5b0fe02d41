/// @file mixed_precision.cpp
/// @brief Lab 04: dynamic loss scaling and a mixed-precision training step with fp32 master
/// weights, on gpulab::nn's host MLP (mixed_precision.hpp).
#include "mixed_precision.hpp"

#include <cmath>
#include <stdexcept>
#include <utility>

namespace lab04 {

namespace nn = gpulab::nn;

// BEGIN SOLUTION(04.5) Dynamic loss scaling: skip and back off on overflow, grow after a run of good steps
bool LossScaler::update(bool finite) {
  if (!finite) {
    scale_ *= backoff_;
    good_steps_ = 0;
    return false;
  }
  if (++good_steps_ >= growth_interval_) {
    scale_ *= growth_;
    good_steps_ = 0;
  }
  return true;
}
// STUB: bool LossScaler::update(bool) { return true; }
// END SOLUTION

MixedPrecisionTrainer::MixedPrecisionTrainer(nn::Sequential& model, nn::Optimizer& optimizer, MixedPrecisionOptions options)
    : model_(model),
      optimizer_(optimizer),
      options_(options),
      scaler_(options.loss_scaling ? options.initial_scale : 1.0f, options.loss_scaling ? options.growth_interval : 1 << 30) {
  const Format format = options.format;
  previous_hook_ = nn::set_rounding([format](float v) { return round_to(v, format); });
  for (nn::Parameter* p : model_.parameters()) {
    if (p->value.device() != nn::Device::kHost) throw std::invalid_argument("MixedPrecisionTrainer: the model must be on the host");
    nn::Parameter master;
    master.name = p->name;
    master.frozen = p->frozen;
    {
      const nn::RoundingHook hook = nn::set_rounding({});  // the master stays fp32
      master.value = p->value.clone();
      master.grad = nn::Tensor(p->value.rows(), p->value.cols());
      nn::set_rounding(hook);
    }
    nn::round_in_place(p->value);
    masters_.push_back(std::move(master));
  }
}

MixedPrecisionTrainer::~MixedPrecisionTrainer() { nn::set_rounding(std::move(previous_hook_)); }

bool MixedPrecisionTrainer::gradients_finite() {
  const std::vector<nn::Parameter*> params = model_.parameters();
  if (inject_overflow_ && !params.empty() && !params[0]->grad.empty()) {
    params[0]->grad.data()[0] = INFINITY;
    inject_overflow_ = false;
  }
  for (nn::Parameter* p : params) {
    if (p->frozen) continue;
    const float* g = p->grad.data();
    for (std::size_t i = 0; i < p->grad.size(); ++i) {
      if (!std::isfinite(g[i])) return false;
    }
  }
  return true;
}

double zero_gradient_share(nn::Sequential& model) {
  std::size_t zeros = 0, total = 0;
  for (nn::Parameter* p : model.parameters()) {
    if (p->frozen || p->grad.empty()) continue;
    for (float g : p->grad.to_host()) zeros += g == 0.0f;
    total += p->grad.size();
  }
  return total == 0 ? 0.0 : static_cast<double>(zeros) / static_cast<double>(total);
}

// BEGIN SOLUTION(04.6) One mixed-precision step: scaled loss, overflow check, unscale into fp32 masters, update, round back
StepResult MixedPrecisionTrainer::step(const nn::Tensor& x, const std::vector<int>& labels) {
  StepResult result;
  result.scale = scaler_.scale();
  model_.zero_grad();
  std::vector<nn::Saved> saved;
  nn::Tensor input = x.clone();
  nn::round_in_place(input);
  const nn::Tensor logits = model_.forward(input, saved);
  // The loss and its gradient in fp32 (no rounding yet): scaling after the rounding would be too
  // late, the small values would already be zero.
  nn::Tensor dlogits(logits.rows(), logits.cols());
  {
    const nn::RoundingHook hook = nn::set_rounding({});
    result.loss = nn::softmax_cross_entropy(logits, labels, &dlogits);
    nn::set_rounding(hook);
  }
  nn::scale(dlogits, options_.loss_weight * result.scale);
  nn::round_in_place(dlogits);
  model_.backward(dlogits, saved);

  const std::vector<nn::Parameter*> params = model_.parameters();
  result.applied = scaler_.update(gradients_finite());
  if (!result.applied) return result;

  // Unscale into the masters' fp32 gradients, step the masters in fp32 (no rounding hook), then
  // copy them, rounded, into the model.
  const nn::RoundingHook hook = nn::set_rounding({});
  std::vector<nn::Parameter*> master_ptrs;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (params[i]->frozen) continue;
    const float* g = params[i]->grad.data();
    float* mg = masters_[i].grad.data();
    for (std::size_t k = 0; k < masters_[i].grad.size(); ++k) mg[k] = g[k] / result.scale;
    master_ptrs.push_back(&masters_[i]);
  }
  optimizer_.step(master_ptrs);
  nn::set_rounding(hook);
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (params[i]->frozen) continue;
    params[i]->value.assign(masters_[i].value.to_host());
    nn::round_in_place(params[i]->value);
  }
  return result;
}
// STUB: StepResult MixedPrecisionTrainer::step(const nn::Tensor&, const std::vector<int>&) { return {}; }
// END SOLUTION

}  // namespace lab04
