/// @file checkpoint.cpp
/// @brief Lab 06 — activation checkpointing: keep each segment's input only, run the segment's
/// forward again in backward. Read lessons/06-memory-management.md.
///
/// Napkin math: n layers of a activations each keep n·a; √n segments of √n layers keep √n inputs
/// plus one segment's √n·a while it runs again: 2√n·a, for one extra forward (≈ a third more
/// compute, a forward being half a backward).
#include <stdexcept>
#include <vector>

#include "memory.hpp"

namespace lab06 {

double checkpointed_step(nn::Sequential& model, const nn::Tensor& x, const std::vector<int>& labels, const std::vector<std::size_t>& bounds) {
  if (bounds.size() < 2 || bounds.front() != 0 || bounds.back() != model.size()) {
    throw std::invalid_argument("checkpointed_step: bounds must run from 0 to the model's layer count");
  }
  // TODO(06.6): Forward keeping segment inputs only; backward segment by segment, each forward run again first
  // See lessons/06-memory-management.md, section "TODO(06.6)".
  (void)x;
  (void)labels;
  return 0.0;
}

}  // namespace lab06
