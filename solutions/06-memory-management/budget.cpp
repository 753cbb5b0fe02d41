/// @file budget.cpp
/// @brief Lab 06 — the memory budget of training, before anything is allocated. Read
/// lessons/06-memory-management.md.
///
/// Napkin math: model state is bytes per parameter times parameters (16 for Adam, either
/// precision: a 7B model needs 112 GB before its first activation); activations scale with the
/// batch and, in a transformer, with the sequence squared (the attention scores).
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "memory.hpp"

namespace lab06 {

// BEGIN SOLUTION(06.1) Bytes of model state per parameter; activations kept for backward, by layer and with recomputation
ModelState model_state_bytes(double parameters, Precision precision, OptimizerKind optimizer) {
  ModelState s;
  const bool mixed = precision == Precision::kMixed;
  const double moments = optimizer == OptimizerKind::kAdam ? 2 : optimizer == OptimizerKind::kSgdMomentum ? 1 : 0;
  s.weights = parameters * (mixed ? 2 : 4);
  s.gradients = parameters * (mixed ? 2 : 4);
  s.optimizer = parameters * (4 * moments + (mixed ? 4 : 0));  // fp32 moments; mixed keeps fp32 master weights too
  return s;
}

double mlp_activation_bytes(const std::vector<std::size_t>& widths, std::size_t batch, double bytes_per_value) {
  if (widths.size() < 2) throw std::invalid_argument("mlp_activation_bytes: need at least two widths");
  double values = 0;
  for (std::size_t i = 0; i + 1 < widths.size(); ++i) {
    values += static_cast<double>(batch * widths[i]);                                  // Linear i's input
    if (i + 2 < widths.size()) values += static_cast<double>(batch * widths[i + 1]);  // the ReLU after it
  }
  return values * bytes_per_value;
}

double transformer_activation_bytes(int layers, double hidden, int heads, double seq, double batch, Recompute recompute) {
  const double sbh = seq * batch * hidden;
  double per_layer = sbh * (34.0 + 5.0 * heads * seq / hidden);
  if (recompute == Recompute::kSelective) per_layer = 34.0 * sbh;
  if (recompute == Recompute::kFull) per_layer = 2.0 * sbh;
  return layers * per_layer;
}

double checkpoint_peak_floats(const std::vector<double>& saved_floats, const std::vector<double>& input_floats, const std::vector<std::size_t>& bounds) {
  if (bounds.size() < 2 || input_floats.size() + 1 != bounds.size() || bounds.back() > saved_floats.size()) {
    throw std::invalid_argument("checkpoint_peak_floats: need bounds of k + 1 entries, k inputs, and a saved size per layer");
  }
  double inputs = 0, peak = 0;
  for (std::size_t k = 0; k + 1 < bounds.size(); ++k) {
    inputs += input_floats[k];
    double segment = 0;
    for (std::size_t l = bounds[k]; l < bounds[k + 1]; ++l) segment += saved_floats[l];
    peak = std::max(peak, inputs + segment);
  }
  return peak;
}
// STUB: ModelState model_state_bytes(double, Precision, OptimizerKind) { return {}; }
// STUB: double mlp_activation_bytes(const std::vector<std::size_t>&, std::size_t, double) { return 0; }
// STUB: double transformer_activation_bytes(int, double, int, double, double, Recompute) { return 0; }
// STUB: double checkpoint_peak_floats(const std::vector<double>&, const std::vector<double>&, const std::vector<std::size_t>&) { return 0; }
// END SOLUTION

}  // namespace lab06
