/// @file mixed_precision.hpp
/// @brief Lab 04 — mixed-precision training of a gpulab::nn MLP on the host: weights, activations
/// and gradients rounded to fp16 (or bf16) through your own conversions (formats.hpp), fp32 master
/// weights, and dynamic loss scaling (Micikevicius et al., "Mixed Precision Training", ICLR 2018;
/// PyTorch's GradScaler). You implement labs/04-tensor-cores/mixed_precision.cpp.
///
/// This header belongs to the tests: do not change it.
#pragma once

#include <cstddef>
#include <vector>

#include "formats.hpp"
#include "gpulab/nn.hpp"

namespace lab04 {

/// Dynamic loss scaling: the loss is multiplied by scale() before backward, so that small
/// gradients survive rounding to fp16; gradients that overflowed (∞ or NaN) mean the scale is
/// too large.
class LossScaler {
 public:
  /// Starts at @p initial; grows by @p growth after @p growth_interval good steps in a row, and
  /// backs off by @p backoff on an overflow (the defaults are PyTorch GradScaler's).
  explicit LossScaler(float initial = 65536.0f, int growth_interval = 2000, float growth = 2.0f, float backoff = 0.5f)
      : scale_(initial), growth_interval_(growth_interval), growth_(growth), backoff_(backoff) {}

  /// The factor the loss (and so every gradient) is multiplied by.
  float scale() const { return scale_; }
  /// Good steps since the last change of the scale.
  int good_steps() const { return good_steps_; }

  /// After a backward pass of a loss multiplied by scale(): @p finite says whether every gradient
  /// is finite. Returns whether the step may be applied. On an overflow: the step is skipped,
  /// the scale multiplied by backoff and the count of good steps reset. Otherwise the count grows,
  /// and when it reaches growth_interval the scale is multiplied by growth and the count restarts.
  /// TODO(04.5)
  bool update(bool finite);

 private:
  float scale_;
  int growth_interval_;
  float growth_, backoff_;
  int good_steps_ = 0;
};

/// How a MixedPrecisionTrainer rounds and scales.
struct MixedPrecisionOptions {
  Format format = Format::kFp16;  ///< what the model's weights, activations and gradients are rounded to
  bool loss_scaling = true;       ///< false: scale fixed at 1 (overflows still skip the step)
  float initial_scale = 65536.0f;
  int growth_interval = 100;
  /// The objective is loss_weight × the batch's mean cross-entropy: < 1 when the batch is one
  /// term of a larger loss (a mean over more samples or tokens than one step holds), which makes
  /// every gradient that much smaller — where fp16's range runs out first.
  float loss_weight = 1.0f;
};

/// What one step did.
struct StepResult {
  double loss = 0;       ///< the batch's mean cross-entropy (not weighted, not scaled; computed in fp32)
  bool applied = false;  ///< false: skipped for an overflow
  float scale = 1;       ///< the scale the step's loss was multiplied by
};

/// Trains a host MLP in low precision with fp32 master weights.
class MixedPrecisionTrainer {
 public:
  /// Takes @p model (host tensors, fp32) and @p optimizer (it will step the master weights):
  /// copies every parameter into an fp32 master, installs the rounding hook (round_to(·,
  /// options.format), through your conversions) and rounds the model's parameters. Given.
  MixedPrecisionTrainer(gpulab::nn::Sequential& model, gpulab::nn::Optimizer& optimizer, MixedPrecisionOptions options);
  /// Puts back the rounding hook that was installed before.
  ~MixedPrecisionTrainer();
  MixedPrecisionTrainer(const MixedPrecisionTrainer&) = delete;
  MixedPrecisionTrainer& operator=(const MixedPrecisionTrainer&) = delete;

  /// One step on a batch (@p x: batch × features, host): forward in low precision; the loss in
  /// fp32 and its gradient multiplied by loss_weight and the scale, then rounded; backward (the hook rounds every
  /// gradient); then, if every gradient of the model is finite, the gradients divided by the
  /// scale into the masters' gradients (fp32), an optimizer step on the masters, and the masters
  /// copied, rounded, into the model; else nothing changes but the scale. Either way the
  /// LossScaler decides the next scale.
  /// TODO(04.6)
  StepResult step(const gpulab::nn::Tensor& x, const std::vector<int>& labels);

  /// The fp32 master weights (and their fp32 gradients), in the model's parameter order.
  std::vector<gpulab::nn::Parameter>& masters() { return masters_; }
  /// The loss scaler.
  LossScaler& scaler() { return scaler_; }
  /// For the tests: the next gradients_finite() call first makes the model's first gradient
  /// element +∞ (an overflow, as a too-large scale causes).
  void inject_overflow_next_step() { inject_overflow_ = true; }

 protected:
  /// Whether every gradient of the model (frozen parameters aside) is finite: call it after
  /// backward, before anything is updated. It applies an overflow the tests injected. Given.
  bool gradients_finite();

 private:
  gpulab::nn::Sequential& model_;
  gpulab::nn::Optimizer& optimizer_;
  MixedPrecisionOptions options_;
  LossScaler scaler_;
  std::vector<gpulab::nn::Parameter> masters_;
  gpulab::nn::RoundingHook previous_hook_;
  bool inject_overflow_ = false;
};

/// The share of exactly-zero elements among the model's gradients (the underflow that loss
/// scaling prevents; an fp32 gradient is practically never exactly zero).
double zero_gradient_share(gpulab::nn::Sequential& model);

}  // namespace lab04
