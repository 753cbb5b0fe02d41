/// @file flat.cpp
/// @brief Lab 11 — flat units: a unit's parameters flattened into one buffer padded to a multiple
/// of W, each rank's shard of it, the parameters as views into it; and the bf16 rounding of the
/// compute copy. Read lessons/11-fsdp.md, sections "TODO(11.1)" and "TODO(11.6)".
///
/// Why flat: one all-gather and one reduce-scatter per unit instead of one per parameter (a
/// block has twelve, six of them d floats: latency, not bandwidth), and every
/// rank's shard the same size, which the padding buys (at most W − 1 floats per unit).
#include <cstdint>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "fsdp.hpp"

namespace lab11 {

// BEGIN SOLUTION(11.1) The flat layout, each rank's real floats, the parameters as views
FlatLayout flat_layout(const std::vector<nn::Parameter*>& params, int world) {
  if (world < 1) throw std::invalid_argument("flat_layout: " + std::to_string(world) + " ranks");
  if (params.empty()) throw std::invalid_argument("flat_layout: a unit with no parameters");
  FlatLayout layout;
  std::set<const nn::Parameter*> seen;
  for (const nn::Parameter* p : params) {
    if (p->frozen) throw std::invalid_argument("flat_layout: " + p->name + " is frozen: only parameters that train are flattened");
    if (!seen.insert(p).second) {
      throw std::invalid_argument("flat_layout: " + p->name + " is listed twice: a parameter shared by two parts of the model belongs in one unit");
    }
    layout.offsets.push_back(layout.numel);
    layout.numel += p->value.size();
  }
  if (layout.numel == 0) throw std::invalid_argument("flat_layout: a unit of empty parameters");
  const std::size_t w = static_cast<std::size_t>(world);
  layout.padded = (layout.numel + w - 1) / w * w;  // ≥ W, since numel ≥ 1
  layout.shard = layout.padded / w;
  return layout;
}

gpulab::dist::Shard real_part(const FlatLayout& layout, int rank) {
  const std::size_t begin = static_cast<std::size_t>(rank) * layout.shard;
  const std::size_t lo = std::min(begin, layout.numel), hi = std::min(begin + layout.shard, layout.numel);
  return {lo, hi - lo};
}

void view_into(const std::vector<nn::Parameter*>& params, const std::vector<std::pair<std::size_t, std::size_t>>& shapes,
               const FlatLayout& layout, nn::Tensor& flat, bool grads) {
  if (flat.rows() != 1 || flat.cols() != layout.padded || shapes.size() != params.size() || layout.offsets.size() != params.size()) {
    throw std::invalid_argument("view_into: a flat buffer of " + flat.shape() + " for " + std::to_string(layout.padded) + " padded floats of " +
                                std::to_string(params.size()) + " parameters");
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    nn::Tensor view = nn::Tensor::view(flat.data() + layout.offsets[i], shapes[i].first, shapes[i].second, flat.device());
    (grads ? params[i]->grad : params[i]->value) = std::move(view);
  }
}
// STUB: FlatLayout flat_layout(const std::vector<nn::Parameter*>& params, int world) {
// STUB:   (void)params; (void)world;  // delete once you use them
// STUB:   return {};
// STUB: }
// STUB:
// STUB: gpulab::dist::Shard real_part(const FlatLayout& layout, int rank) {
// STUB:   (void)layout; (void)rank;  // delete once you use them
// STUB:   return {};
// STUB: }
// STUB:
// STUB: void view_into(const std::vector<nn::Parameter*>& params, const std::vector<std::pair<std::size_t, std::size_t>>& shapes,
// STUB:                const FlatLayout& layout, nn::Tensor& flat, bool grads) {
// STUB:   (void)params; (void)shapes; (void)layout; (void)flat; (void)grads;  // delete once you use them
// STUB: }
// END SOLUTION

// BEGIN SOLUTION(11.6) Round to the nearest bfloat16, ties to even; the compute copy in bf16, the master shard fp32
float round_to_bf16(float x) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u) return x;  // inf and NaN stay as they are
  // Add half of the 16 dropped bits' unit, minus one unless the kept part is odd: ties to even.
  // A carry out of the mantissa bumps the exponent, and past the largest finite value gives inf.
  bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  float y = 0.0f;
  std::memcpy(&y, &bits, sizeof y);
  return y;
}

void ShardedGPT::round_compute_copy(FlatUnit& unit) {
  if (!options_.bf16_compute) return;
  if (unit.full.device() == nn::Device::kHost) {
    float* v = unit.full.data();
    for (std::size_t i = 0; i < unit.full.size(); ++i) v[i] = round_to_bf16(v[i]);
  } else {  // device memory: through the host (a kernel would do it in place)
    std::vector<float> v = unit.full.to_host();
    for (float& x : v) x = round_to_bf16(x);
    unit.full.assign(v);
  }
}
// STUB: float round_to_bf16(float x) {
// STUB:   return x;
// STUB: }
// STUB:
// STUB: void ShardedGPT::round_compute_copy(FlatUnit& unit) {
// STUB:   (void)unit;  // delete once you use it
// STUB: }
// END SOLUTION

}  // namespace lab11
