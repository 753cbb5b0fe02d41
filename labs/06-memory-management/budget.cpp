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

// TODO(06.1): Bytes of model state per parameter; activations kept for backward, by layer and with recomputation
// See lessons/06-memory-management.md, section "TODO(06.1)".
ModelState model_state_bytes(double, Precision, OptimizerKind) { return {}; }
double mlp_activation_bytes(const std::vector<std::size_t>&, std::size_t, double) { return 0; }
double transformer_activation_bytes(int, double, int, double, double, Recompute) { return 0; }
double checkpoint_peak_floats(const std::vector<double>&, const std::vector<double>&, const std::vector<std::size_t>&) { return 0; }

}  // namespace lab06
