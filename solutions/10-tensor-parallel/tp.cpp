/// @file tp.cpp
/// @brief Lab 10 — tensor parallelism inside a GPT block: the conjugate operators f and g (and
/// their sequence-parallel forms), column- and row-parallel Linear, attention split by heads,
/// and the block with and without sequence parallelism. Read lessons/10-tensor-parallel.md.
///
/// Napkin math for one block of R = B·T rows and width d on t ranks: the weights are 12d² floats,
/// 12d²/t per rank; forward is ≈ 24·R·d² FLOPs (plus attention's 4·R·T·d), 1/t of it per rank.
/// The price: two all-reduces of R·d floats forward (after attention's c_proj and the MLP's
/// c_proj) and two backward (before c_attn and c_fc), each 2(t − 1)/t · 4·R·d bytes per rank.
/// Sequence parallelism turns each into an all-gather plus a reduce-scatter of the same bytes
/// (backward also gathers each column layer's kept rows again: 2 all-gathers more), and divides
/// what LayerNorm, dropout, the residual and the column layers' inputs keep by t.
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tp.hpp"

namespace lab10 {

using gpulab::dist::CollectiveRequest;

std::size_t slice_begin(std::size_t n, int t, int r, const char* what) {
  if (t < 1 || r < 0 || r >= t) throw std::invalid_argument(std::string(what) + ": rank " + std::to_string(r) + " of " + std::to_string(t));
  if (n % static_cast<std::size_t>(t) != 0) {
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(n) + " do not split evenly over " + std::to_string(t) + " ranks");
  }
  return static_cast<std::size_t>(r) * (n / static_cast<std::size_t>(t));
}

void dropout_in_place(nn::Tensor& x, float p, std::uint64_t seed, const nn::Pass& pass, std::uint32_t tensor, std::uint64_t first) {
  if (!pass.training || p == 0.0f) return;
  nn::dropout(x, nn::DropoutStream{seed, pass.step, tensor, p}, first);
}

namespace {

/// Columns [g·out/parts + r·w, … + w) of every group g, w = out/(parts·t), side by side.
nn::Parameter slice_columns(const nn::Parameter& full, std::size_t parts, int t, int r) {
  const std::size_t rows = full.value.rows(), out = full.value.cols();
  if (parts == 0 || out % parts != 0) throw std::invalid_argument(full.name + ": " + std::to_string(out) + " columns in " + std::to_string(parts) + " groups");
  const std::size_t group = out / parts, first = slice_begin(group, t, r, (full.name + "'s columns").c_str()), width = group / static_cast<std::size_t>(t);
  const std::vector<float> all = full.value.to_host();
  std::vector<float> mine;
  mine.reserve(rows * parts * width);
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t g = 0; g < parts; ++g) {
      const auto from = all.begin() + static_cast<long>(i * out + g * group + first);
      mine.insert(mine.end(), from, from + static_cast<long>(width));
    }
  }
  nn::Parameter p;
  p.name = full.name;
  p.value = nn::Tensor::from(mine, rows, parts * width, full.value.device());
  return p;
}

/// Rows [r·in/t, (r + 1)·in/t) of @p full.
nn::Parameter slice_rows(const nn::Parameter& full, int t, int r) {
  const std::size_t in = full.value.rows(), cols = full.value.cols();
  const std::size_t first = slice_begin(in, t, r, (full.name + "'s rows").c_str()), count = in / static_cast<std::size_t>(t);
  const std::vector<float> all = full.value.to_host();
  nn::Parameter p;
  p.name = full.name;
  p.value = nn::Tensor::from(std::vector<float>(all.begin() + static_cast<long>(first * cols), all.begin() + static_cast<long>((first + count) * cols)),
                             count, cols, full.value.device());
  return p;
}

nn::Parameter copy_of(const nn::Parameter& full) {
  nn::Parameter p;
  p.name = full.name;
  p.value = full.value.clone();
  return p;
}

/// A LayerNorm holding @p gamma's and @p beta's values.
nn::LayerNorm layernorm_like(const nn::Parameter& gamma, const nn::Parameter& beta, const std::string& name) {
  nn::LayerNorm ln(gamma.value.cols(), 1e-5f, name, gamma.value.device());
  ln.gamma().value = gamma.value.clone();
  ln.beta().value = beta.value.clone();
  return ln;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// 10.1
// ---------------------------------------------------------------------------------------------

// BEGIN SOLUTION(10.1) f and g: the all-reduce; sequence parallelism: the all-gather and the reduce-scatter of rows
void all_reduce(Communicator& tp, nn::Tensor& x) {
  CollectiveRequest request = tp.iallreduce_sum(x.data(), x.size(), "all-reduce");
  tp.wait(request);
}

nn::Tensor gather_rows(Communicator& tp, const nn::Tensor& shard) {
  const std::size_t t = static_cast<std::size_t>(tp.size());
  nn::Tensor full = nn::Tensor::uninitialized(shard.rows() * t, shard.cols(), shard.device());
  CollectiveRequest request = tp.iall_gather(shard.data(), full.data(), full.size(), "all-gather");
  tp.wait(request);
  return full;
}

nn::Tensor reduce_scatter_rows(Communicator& tp, const nn::Tensor& full) {
  const std::size_t t = static_cast<std::size_t>(tp.size());
  if (full.rows() % t != 0) {
    throw std::invalid_argument("reduce_scatter_rows: " + std::to_string(full.rows()) + " rows do not split over " + std::to_string(t) + " ranks");
  }
  nn::Tensor shard = nn::Tensor::uninitialized(full.rows() / t, full.cols(), full.device());
  CollectiveRequest request = tp.ireduce_scatter_sum(full.data(), shard.data(), full.size(), "reduce-scatter");
  tp.wait(request);
  return shard;
}
// STUB: void all_reduce(Communicator& tp, nn::Tensor& x) {
// STUB:   (void)tp; (void)x;  // delete once you use them
// STUB: }
// STUB:
// STUB: nn::Tensor gather_rows(Communicator& tp, const nn::Tensor& shard) {
// STUB:   (void)tp; (void)shard;  // delete once you use them
// STUB:   return nn::Tensor();
// STUB: }
// STUB:
// STUB: nn::Tensor reduce_scatter_rows(Communicator& tp, const nn::Tensor& full) {
// STUB:   (void)tp; (void)full;  // delete once you use them
// STUB:   return nn::Tensor();
// STUB: }
// END SOLUTION

// ---------------------------------------------------------------------------------------------
// 10.2
// ---------------------------------------------------------------------------------------------

ColumnParallelLinear::ColumnParallelLinear(Communicator& tp, const nn::Parameter& weight, const nn::Parameter& bias, std::size_t parts,
                                           bool sequence_parallel)
    : tp(tp), sequence_parallel(sequence_parallel), weight(slice_columns(weight, parts, tp.size(), tp.rank())),
      bias(slice_columns(bias, parts, tp.size(), tp.rank())) {}

RowParallelLinear::RowParallelLinear(Communicator& tp, const nn::Parameter& weight, const nn::Parameter& bias, bool sequence_parallel)
    : tp(tp), sequence_parallel(sequence_parallel), weight(slice_rows(weight, tp.size(), tp.rank())), bias(copy_of(bias)) {}

// BEGIN SOLUTION(10.2) Column- and row-parallel Linear, forward and backward
nn::Tensor ColumnParallelLinear::forward(const nn::Tensor& x, nn::Saved& saved) {
  saved.clear();
  saved.tensors.push_back(x.clone());
  // With sequence parallelism only this rank's rows are kept (1/t of the input): backward
  // gathers them again, as Megatron-LM does, rather than keep the whole input alive.
  if (sequence_parallel) return nn::linear(gather_rows(tp, x), weight, &bias);
  return nn::linear(x, weight, &bias);
}

nn::Tensor ColumnParallelLinear::backward(const nn::Tensor& dy, const nn::Saved& saved) {
  if (sequence_parallel) return reduce_scatter_rows(tp, nn::linear_backward(dy, gather_rows(tp, saved.tensors.at(0)), weight, &bias));
  nn::Tensor dx = nn::linear_backward(dy, saved.tensors.at(0), weight, &bias);
  all_reduce(tp, dx);
  return dx;
}

nn::Tensor RowParallelLinear::forward(const nn::Tensor& x, nn::Saved& saved) {
  saved.clear();
  saved.tensors.push_back(x.clone());
  nn::Tensor partial = nn::linear(x, weight);
  nn::Tensor y;
  if (sequence_parallel) {
    y = reduce_scatter_rows(tp, partial);
  } else {
    all_reduce(tp, partial);
    y = std::move(partial);
  }
  nn::add_bias(y, bias);
  return y;
}

nn::Tensor RowParallelLinear::backward(const nn::Tensor& dy, const nn::Saved& saved) {
  nn::bias_backward(dy, bias);
  if (sequence_parallel) return nn::linear_backward(gather_rows(tp, dy), saved.tensors.at(0), weight);
  return nn::linear_backward(dy, saved.tensors.at(0), weight);
}
// STUB: nn::Tensor ColumnParallelLinear::forward(const nn::Tensor& x, nn::Saved& saved) {
// STUB:   (void)x; (void)saved;  // delete once you use them
// STUB:   return nn::Tensor();
// STUB: }
// STUB:
// STUB: nn::Tensor ColumnParallelLinear::backward(const nn::Tensor& dy, const nn::Saved& saved) {
// STUB:   (void)dy; (void)saved;  // delete once you use them
// STUB:   return nn::Tensor();
// STUB: }
// STUB:
// STUB: nn::Tensor RowParallelLinear::forward(const nn::Tensor& x, nn::Saved& saved) {
// STUB:   (void)x; (void)saved;  // delete once you use them
// STUB:   return nn::Tensor();
// STUB: }
// STUB:
// STUB: nn::Tensor RowParallelLinear::backward(const nn::Tensor& dy, const nn::Saved& saved) {
// STUB:   (void)dy; (void)saved;  // delete once you use them
// STUB:   return nn::Tensor();
// STUB: }
// END SOLUTION

// ---------------------------------------------------------------------------------------------
// 10.3
// ---------------------------------------------------------------------------------------------

ParallelAttention::ParallelAttention(Communicator& tp, nn::CausalSelfAttention& full, float dropout, std::uint32_t tensor, std::uint64_t seed,
                                     bool sequence_parallel)
    : heads(heads_of(full.heads(), full.head_width(), tp.size(), tp.rank())),
      dropout{seed, tensor, dropout},
      c_attn(tp, *full.parameters()[0], *full.parameters()[1], 3, sequence_parallel),
      c_proj(tp, *full.parameters()[2], *full.parameters()[3], sequence_parallel) {}

// BEGIN SOLUTION(10.3) This rank's heads, and attention split by them, forward and backward
nn::HeadSlice heads_of(std::size_t heads, std::size_t head_width, int t, int r) {
  if (t < 1 || r < 0 || r >= t) throw std::invalid_argument("heads_of: rank " + std::to_string(r) + " of " + std::to_string(t));
  if (heads % static_cast<std::size_t>(t) != 0) {
    throw std::invalid_argument("attention: " + std::to_string(heads) + " heads do not split over " + std::to_string(t) +
                                " tensor-parallel ranks (t must divide the heads)");
  }
  const std::size_t count = heads / static_cast<std::size_t>(t);
  return nn::HeadSlice{count, static_cast<std::size_t>(r) * count, heads, head_width};
}

nn::Tensor ParallelAttention::forward(const nn::Tensor& x, const nn::Pass& pass, nn::Saved& saved) {
  saved.clear();
  saved.parts.resize(3);
  const nn::Tensor qkv = c_attn.forward(x, saved.parts[0]);
  const nn::Tensor merged = nn::attention_heads_forward(qkv, heads, pass, dropout, saved.parts[1]);
  return c_proj.forward(merged, saved.parts[2]);
}

nn::Tensor ParallelAttention::backward(const nn::Tensor& dy, const nn::Pass& pass, const nn::Saved& saved) {
  const nn::Tensor dmerged = c_proj.backward(dy, saved.parts.at(2));
  const nn::Tensor dqkv = nn::attention_heads_backward(dmerged, heads, pass, dropout, saved.parts.at(1));
  return c_attn.backward(dqkv, saved.parts.at(0));
}
// STUB: nn::HeadSlice heads_of(std::size_t heads, std::size_t head_width, int t, int r) {
// STUB:   (void)heads; (void)head_width; (void)t; (void)r;  // delete once you use them
// STUB:   return {};
// STUB: }
// STUB:
// STUB: nn::Tensor ParallelAttention::forward(const nn::Tensor& x, const nn::Pass& pass, nn::Saved& saved) {
// STUB:   (void)x; (void)pass; (void)saved;  // delete once you use them
// STUB:   return nn::Tensor();
// STUB: }
// STUB:
// STUB: nn::Tensor ParallelAttention::backward(const nn::Tensor& dy, const nn::Pass& pass, const nn::Saved& saved) {
// STUB:   (void)dy; (void)pass; (void)saved;  // delete once you use them
// STUB:   return nn::Tensor();
// STUB: }
// END SOLUTION

// ---------------------------------------------------------------------------------------------
// 10.5
// ---------------------------------------------------------------------------------------------

ParallelBlock::ParallelBlock(Communicator& tp, nn::Block& full, float dropout, std::uint32_t first_tensor, std::uint64_t dropout_seed,
                             bool sequence_parallel)
    : tp(tp), sequence_parallel(sequence_parallel), p(dropout), tensor(first_tensor), seed(dropout_seed),
      ln_1(layernorm_like(*full.parameters()[0], *full.parameters()[1], "ln_1.")),
      attn(tp, full.attention(), dropout, first_tensor, dropout_seed, sequence_parallel),
      ln_2(layernorm_like(*full.parameters()[6], *full.parameters()[7], "ln_2.")),
      c_fc(tp, *full.parameters()[8], *full.parameters()[9], 1, sequence_parallel),
      c_proj(tp, *full.parameters()[10], *full.parameters()[11], sequence_parallel) {}

std::vector<TPParameter> ParallelBlock::parameters() {
  return {{&ln_1.gamma(), true},       {&ln_1.beta(), true},       {&attn.c_attn.weight, false}, {&attn.c_attn.bias, false},
          {&attn.c_proj.weight, false}, {&attn.c_proj.bias, true}, {&ln_2.gamma(), true},        {&ln_2.beta(), true},
          {&c_fc.weight, false},        {&c_fc.bias, false},        {&c_proj.weight, false},      {&c_proj.bias, true}};
}

// BEGIN SOLUTION(10.5) The block on the rows this rank holds, forward and backward
nn::Tensor ParallelBlock::forward(const nn::Tensor& x, const nn::Pass& pass, nn::Saved& saved) {
  saved.clear();
  saved.parts.resize(6);
  // With sequence parallelism this rank's rows start at element r·(R/t)·d of the R × d tensor.
  const std::uint64_t first = sequence_parallel ? static_cast<std::uint64_t>(tp.rank()) * x.size() : 0;
  nn::Tensor x1 = attn.forward(ln_1.forward(x, saved.parts[0]), pass, saved.parts[1]);
  dropout_in_place(x1, p, seed, pass, tensor + 1, first);
  nn::axpy(1.0f, x, x1);
  nn::round_in_place(x1);
  const nn::Tensor h = c_fc.forward(ln_2.forward(x1, saved.parts[2]), saved.parts[3]);
  const nn::Tensor g = nn::GELU(h.cols()).forward(h, saved.parts[4]);
  nn::Tensor x2 = c_proj.forward(g, saved.parts[5]);
  dropout_in_place(x2, p, seed, pass, tensor + 2, first);
  nn::axpy(1.0f, x1, x2);
  nn::round_in_place(x2);
  return x2;
}

nn::Tensor ParallelBlock::backward(const nn::Tensor& dy, const nn::Pass& pass, const nn::Saved& saved) {
  const std::uint64_t first = sequence_parallel ? static_cast<std::uint64_t>(tp.rank()) * dy.size() : 0;
  nn::Tensor branch = dy.clone();
  dropout_in_place(branch, p, seed, pass, tensor + 2, first);
  const nn::Tensor dg = c_proj.backward(branch, saved.parts.at(5));
  nn::GELU gelu(dg.cols());
  const nn::Tensor dh = gelu.backward(dg, saved.parts.at(4));
  nn::Tensor dx1 = ln_2.backward(c_fc.backward(dh, saved.parts.at(3)), saved.parts.at(2));
  nn::axpy(1.0f, dy, dx1);
  nn::round_in_place(dx1);
  branch = dx1.clone();
  dropout_in_place(branch, p, seed, pass, tensor + 1, first);
  nn::Tensor dx = ln_1.backward(attn.backward(branch, pass, saved.parts.at(1)), saved.parts.at(0));
  nn::axpy(1.0f, dx1, dx);
  nn::round_in_place(dx);
  return dx;
}
// STUB: nn::Tensor ParallelBlock::forward(const nn::Tensor& x, const nn::Pass& pass, nn::Saved& saved) {
// STUB:   (void)x; (void)pass; (void)saved;  // delete once you use them
// STUB:   return nn::Tensor();
// STUB: }
// STUB:
// STUB: nn::Tensor ParallelBlock::backward(const nn::Tensor& dy, const nn::Pass& pass, const nn::Saved& saved) {
// STUB:   (void)dy; (void)pass; (void)saved;  // delete once you use them
// STUB:   return nn::Tensor();
// STUB: }
// END SOLUTION

}  // namespace lab10
