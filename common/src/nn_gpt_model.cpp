/// @file nn_gpt_model.cpp
/// @brief The GPT's attention, block and model, and generation with and without a KV cache
/// (see nn_gpt.hpp). Everything is written once over detail::Ops, so the host and the device run
/// the same composition of GEMMs and row operations.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "gpulab/nn_gpt.hpp"
#include "nn_internal.hpp"

namespace gpulab::nn {
namespace {

const detail::Ops& ops_of(const Tensor& t) { return detail::ops_for(t.device()); }

/// A rows × cols parameter named @p name: N(0, std²) from @p seed, or zeros when std is 0.
Parameter make_parameter(const std::string& name, std::size_t rows, std::size_t cols, float std, std::uint64_t seed, Device device) {
  Parameter p;
  p.name = name;
  p.value = std > 0.0f ? Tensor::from(detail::normal(rows * cols, std, seed), rows, cols, device) : Tensor(rows, cols, device);
  round_in_place(p.value);
  return p;
}

void ensure_grad(Parameter& p) {
  if (!p.frozen && p.grad.empty()) p.grad = Tensor(p.value.rows(), p.value.cols(), p.value.device());
}

/// Inverted dropout of @p t in place, element i of t being element i of tensor @p tensor's mask
/// (forward and backward are the same operation: the mask is made again).
void drop_in_place(Tensor& t, float p, std::uint64_t seed, const Pass& pass, std::uint32_t tensor) {
  if (!pass.training || p == 0.0f) return;
  ops_of(t).dropout(t.data(), t.data(), t.size(), detail::dropout_key(seed, pass.step, tensor), 0, p);
  round_in_place(t);  // x / (1 − p) is a new value at the op's boundary
}

/// Distinct seeds for a layer's weights from one seed.
std::uint64_t sub_seed(std::uint64_t seed, std::uint64_t k) { return detail::mix64(seed + k * detail::kGolden); }

void check_dropout(float p, const std::string& who) {
  if (!(p >= 0.0f && p < 1.0f)) throw std::invalid_argument(who + ": dropout must be in [0, 1) (got " + std::to_string(p) + ")");
}

}  // namespace

Tensor linear(const Tensor& x, const Parameter& w, const Parameter* b) {
  if (x.cols() != w.value.rows()) throw std::invalid_argument("linear: x " + x.shape() + " against W " + w.value.shape());
  Tensor y = Tensor::uninitialized(x.rows(), w.value.cols(), x.device());
  gemm(x, false, w.value, false, y);
  if (b != nullptr) ops_of(x).add_row(y.data(), b->value.data(), y.rows(), y.cols());
  round_in_place(y);
  return y;
}

Tensor linear_backward(const Tensor& dy, const Tensor& x, Parameter& w, Parameter* b) {
  if (dy.cols() != w.value.cols() || x.rows() != dy.rows()) throw std::invalid_argument("linear_backward: dy " + dy.shape() + ", x " + x.shape() + ", W " + w.value.shape());
  if (!w.frozen) {
    ensure_grad(w);
    gemm(x, true, dy, false, w.grad, 1.0f, 1.0f);
    round_in_place(w.grad);
  }
  if (b != nullptr) bias_backward(dy, *b);
  Tensor dx = Tensor::uninitialized(dy.rows(), w.value.rows(), dy.device());
  gemm(dy, false, w.value, true, dx);
  round_in_place(dx);
  return dx;
}

void add_bias(Tensor& y, const Parameter& b) {
  if (b.value.size() != y.cols()) throw std::invalid_argument("add_bias: y " + y.shape() + " against b " + b.value.shape());
  ops_of(y).add_row(y.data(), b.value.data(), y.rows(), y.cols());
  round_in_place(y);
}

void bias_backward(const Tensor& dy, Parameter& b) {
  if (b.frozen) return;
  if (b.value.size() != dy.cols()) throw std::invalid_argument("bias_backward: dy " + dy.shape() + " against b " + b.value.shape());
  ensure_grad(b);
  ops_of(dy).sum_rows(b.grad.data(), dy.data(), dy.rows(), dy.cols());
  round_in_place(b.grad);
}

// ---------------------------------------------------------------------------------------------
// Attention
// ---------------------------------------------------------------------------------------------

CausalSelfAttention::CausalSelfAttention(std::size_t width, std::size_t heads, std::uint64_t seed, float proj_std, float dropout,
                                         std::uint32_t dropout_tensor, std::uint64_t dropout_seed, const std::string& name, Device device)
    : width_(width), heads_(heads), p_(dropout), tensor_(dropout_tensor), dropout_seed_(dropout_seed) {
  if (width == 0 || heads == 0 || width % heads != 0) {
    throw std::invalid_argument("CausalSelfAttention: width " + std::to_string(width) + " must be a positive multiple of heads " + std::to_string(heads));
  }
  check_dropout(dropout, "CausalSelfAttention");
  w_attn_ = make_parameter(name + "c_attn.weight", width, 3 * width, 0.02f, sub_seed(seed, 1), device);
  b_attn_ = make_parameter(name + "c_attn.bias", 1, 3 * width, 0.0f, 0, device);
  w_proj_ = make_parameter(name + "c_proj.weight", width, width, proj_std, sub_seed(seed, 2), device);
  b_proj_ = make_parameter(name + "c_proj.bias", 1, width, 0.0f, 0, device);
}

namespace {

void check_slice(const HeadSlice& s, std::size_t qkv_rows, std::size_t qkv_cols, std::size_t T, const char* who) {
  if (s.count == 0 || s.head_width == 0 || s.first + s.count > s.total || T == 0 || qkv_rows % T != 0 || qkv_cols != 3 * s.count * s.head_width) {
    throw std::invalid_argument(std::string(who) + ": heads [" + std::to_string(s.first) + ", " + std::to_string(s.first + s.count) + ") of " +
                                std::to_string(s.total) + ", " + std::to_string(s.head_width) + " wide, on " + std::to_string(qkv_rows) + " × " +
                                std::to_string(qkv_cols) + " in sequences of " + std::to_string(T));
  }
}

/// Attention dropout over P (B·count·T × T) of @p slice, in place: batch b's rows are one run of
/// the mask, starting at global head slice.first.
void drop_heads(const detail::Ops& o, float* p, std::size_t B, std::size_t T, const HeadSlice& slice, const Pass& pass, const AttentionDropout& d) {
  if (!pass.training || d.p == 0.0f) return;
  const std::uint64_t key = detail::dropout_key(d.seed, pass.step, d.tensor), run = slice.count * T * T;
  for (std::size_t b = 0; b < B; ++b) o.dropout(p + b * run, p + b * run, run, key, (b * slice.total + slice.first) * T * T, d.p);
}

}  // namespace

Tensor attention_heads_forward(const Tensor& qkv, const HeadSlice& slice, const Pass& pass, const AttentionDropout& dropout, Saved& saved) {
  const std::size_t T = pass.T, H = slice.count, hd = slice.head_width, w = H * hd;
  check_slice(slice, qkv.rows(), qkv.cols(), T, "attention_heads_forward");
  const std::size_t B = qkv.rows() / T, n = B * H * T;
  const Device dev = qkv.device();
  const detail::Ops& o = detail::ops_for(dev);
  Tensor q = Tensor::uninitialized(n, hd, dev), k = Tensor::uninitialized(n, hd, dev), v = Tensor::uninitialized(n, hd, dev);
  o.heads_from_rows(q.data(), qkv.data(), B, T, H, hd, 3 * w, 0);
  o.heads_from_rows(k.data(), qkv.data(), B, T, H, hd, 3 * w, w);
  o.heads_from_rows(v.data(), qkv.data(), B, T, H, hd, 3 * w, 2 * w);
  // Scores for every (b, h): Q·Kᵀ, T × T (the masked half too: a GEMM is cheaper than skipping it).
  Tensor p = Tensor::uninitialized(n, T, dev);
  o.gemm_batched(false, true, T, T, hd, 1.0f, q.data(), T * hd, k.data(), T * hd, 0.0f, p.data(), T * T, B * H);
  o.causal_softmax(p.data(), p.data(), B * H, T, T, 0, 1.0f / std::sqrt(static_cast<float>(hd)));
  round_in_place(p);
  Tensor dropped;
  const Tensor* weights = &p;
  if (pass.training && dropout.p > 0.0f) {
    dropped = p.clone();
    drop_heads(o, dropped.data(), B, T, slice, pass, dropout);
    round_in_place(dropped);
    weights = &dropped;
  }
  Tensor heads_out = Tensor::uninitialized(n, hd, dev);
  o.gemm_batched(false, false, T, hd, T, 1.0f, weights->data(), T * T, v.data(), T * hd, 0.0f, heads_out.data(), T * hd, B * H);
  Tensor merged = Tensor::uninitialized(B * T, w, dev);
  o.rows_from_heads(merged.data(), heads_out.data(), B, T, H, hd, w, 0);
  round_in_place(merged);
  saved.clear();
  saved.tensors.push_back(std::move(q));
  saved.tensors.push_back(std::move(k));
  saved.tensors.push_back(std::move(v));
  saved.tensors.push_back(std::move(p));
  return merged;
}

Tensor attention_heads_backward(const Tensor& dmerged, const HeadSlice& slice, const Pass& pass, const AttentionDropout& dropout,
                                const Saved& saved) {
  if (saved.tensors.size() != 4) throw std::logic_error("attention_heads_backward: without its forward's saved Q, K, V and P");
  const Tensor &q = saved.tensors[0], &k = saved.tensors[1], &v = saved.tensors[2], &p = saved.tensors[3];
  const std::size_t H = slice.count, hd = slice.head_width, w = H * hd, T = p.cols();
  if (pass.T != T) throw std::invalid_argument("attention_heads_backward: a Pass of T = " + std::to_string(pass.T) + " for a forward of T = " + std::to_string(T));
  check_slice(slice, dmerged.rows(), 3 * dmerged.cols(), T, "attention_heads_backward");
  const std::size_t B = dmerged.rows() / T, n = B * H * T;
  if (q.rows() != n || q.cols() != hd) throw std::invalid_argument("attention_heads_backward: saved heads for another slice");
  const Device dev = dmerged.device();
  const detail::Ops& o = detail::ops_for(dev);
  Tensor dout = Tensor::uninitialized(n, hd, dev);
  o.heads_from_rows(dout.data(), dmerged.data(), B, T, H, hd, w, 0);
  const bool dropping = pass.training && dropout.p > 0.0f;
  Tensor dropped;
  const Tensor* weights = &p;
  if (dropping) {  // the mask is made again, not stored
    dropped = p.clone();
    drop_heads(o, dropped.data(), B, T, slice, pass, dropout);
    round_in_place(dropped);
    weights = &dropped;
  }
  Tensor dv = Tensor::uninitialized(n, hd, dev), ds = Tensor::uninitialized(n, T, dev);
  o.gemm_batched(true, false, T, hd, T, 1.0f, weights->data(), T * T, dout.data(), T * hd, 0.0f, dv.data(), T * hd, B * H);  // dV = P̃ᵀ·dO
  o.gemm_batched(false, true, T, T, hd, 1.0f, dout.data(), T * hd, v.data(), T * hd, 0.0f, ds.data(), T * T, B * H);          // dP̃ = dO·Vᵀ
  if (dropping) {                                                                                                               // dP
    drop_heads(o, ds.data(), B, T, slice, pass, dropout);
    round_in_place(ds);
  }
  o.causal_softmax_backward(ds.data(), ds.data(), p.data(), n, T, 1.0f / std::sqrt(static_cast<float>(hd)));  // dS
  round_in_place(ds);
  Tensor dq = Tensor::uninitialized(n, hd, dev), dk = Tensor::uninitialized(n, hd, dev);
  o.gemm_batched(false, false, T, hd, T, 1.0f, ds.data(), T * T, k.data(), T * hd, 0.0f, dq.data(), T * hd, B * H);  // dQ = dS·K
  o.gemm_batched(true, false, T, hd, T, 1.0f, ds.data(), T * T, q.data(), T * hd, 0.0f, dk.data(), T * hd, B * H);   // dK = dSᵀ·Q
  Tensor dqkv = Tensor::uninitialized(B * T, 3 * w, dev);
  o.rows_from_heads(dqkv.data(), dq.data(), B, T, H, hd, 3 * w, 0);
  o.rows_from_heads(dqkv.data(), dk.data(), B, T, H, hd, 3 * w, w);
  o.rows_from_heads(dqkv.data(), dv.data(), B, T, H, hd, 3 * w, 2 * w);
  round_in_place(dqkv);
  return dqkv;
}

Tensor CausalSelfAttention::forward(const Tensor& x, const Pass& pass, Saved& saved) const {
  const std::size_t d = width_, T = pass.T;
  if (x.cols() != d || T == 0 || x.rows() % T != 0 || x.device() != w_attn_.value.device()) {
    throw std::invalid_argument("CausalSelfAttention(" + std::to_string(d) + "): input " + x.shape() + " in sequences of " + std::to_string(T));
  }
  saved.clear();
  saved.parts.resize(1);
  Tensor merged = attention_heads_forward(linear(x, w_attn_, &b_attn_), HeadSlice{heads_, 0, heads_, d / heads_}, pass,
                                          AttentionDropout{dropout_seed_, tensor_, p_}, saved.parts[0]);
  Tensor y = linear(merged, w_proj_, &b_proj_);
  saved.tensors.push_back(x.clone());
  saved.tensors.push_back(std::move(merged));
  return y;
}

Tensor CausalSelfAttention::backward(const Tensor& dy, const Pass& pass, const Saved& saved) {
  if (saved.tensors.size() != 2 || saved.parts.size() != 1) throw std::logic_error("CausalSelfAttention: backward without its forward's saved activations");
  const Tensor &x = saved.tensors[0], &merged = saved.tensors[1];
  detail::check_like(dy, merged, "CausalSelfAttention backward: dy and the output");
  const Tensor dqkv = attention_heads_backward(linear_backward(dy, merged, w_proj_, &b_proj_), HeadSlice{heads_, 0, heads_, width_ / heads_}, pass,
                                               AttentionDropout{dropout_seed_, tensor_, p_}, saved.parts[0]);
  return linear_backward(dqkv, x, w_attn_, &b_attn_);
}

double CausalSelfAttention::forward_flops(std::size_t rows, std::size_t T) const {
  const double r = static_cast<double>(rows), d = static_cast<double>(width_);
  return 2.0 * r * d * 3.0 * d + 2.0 * r * d * d + 2.0 * 2.0 * r * static_cast<double>(T) * d;
}

std::size_t CausalSelfAttention::saved_floats(std::size_t rows, std::size_t T) const { return rows * (5 * width_ + heads_ * T); }

// ---------------------------------------------------------------------------------------------
// The block
// ---------------------------------------------------------------------------------------------

Block::Block(std::size_t width, std::size_t heads, std::size_t layers, std::uint64_t seed, float dropout, std::uint32_t first_tensor,
             std::uint64_t dropout_seed, const std::string& name, Device device)
    : width_(width),
      p_(dropout),
      tensor_(first_tensor),
      dropout_seed_(dropout_seed),
      ln_1_(width, 1e-5f, name + "ln_1.", device),
      attn_(width, heads, sub_seed(seed, 11), 0.02f / std::sqrt(2.0f * static_cast<float>(std::max<std::size_t>(layers, 1))), dropout,
            first_tensor, dropout_seed, name + "attn.", device),
      ln_2_(width, 1e-5f, name + "ln_2.", device) {
  const float residual_std = 0.02f / std::sqrt(2.0f * static_cast<float>(std::max<std::size_t>(layers, 1)));
  w_fc_ = make_parameter(name + "mlp.c_fc.weight", width, 4 * width, 0.02f, sub_seed(seed, 12), device);
  b_fc_ = make_parameter(name + "mlp.c_fc.bias", 1, 4 * width, 0.0f, 0, device);
  w_out_ = make_parameter(name + "mlp.c_proj.weight", 4 * width, width, residual_std, sub_seed(seed, 13), device);
  b_out_ = make_parameter(name + "mlp.c_proj.bias", 1, width, 0.0f, 0, device);
}

std::vector<Parameter*> Block::parameters() {
  std::vector<Parameter*> all = ln_1_.parameters();
  for (Parameter* p : attn_.parameters()) all.push_back(p);
  for (Parameter* p : ln_2_.parameters()) all.push_back(p);
  for (Parameter* p : {&w_fc_, &b_fc_, &w_out_, &b_out_}) all.push_back(p);
  return all;
}

Tensor Block::forward(const Tensor& x, const Pass& pass, Saved& saved) const {
  if (x.cols() != width_) throw std::invalid_argument("Block(" + std::to_string(width_) + "): input " + x.shape());
  saved.clear();
  saved.parts.resize(3);
  const detail::Ops& o = ops_of(x);
  // x1 = x + dropout(attn(ln_1(x)))
  Tensor x1 = attn_.forward(ln_1_.forward(x, saved.parts[0]), pass, saved.parts[1]);
  drop_in_place(x1, p_, dropout_seed_, pass, tensor_ + 1);
  axpy(1.0f, x, x1);
  round_in_place(x1);
  // x2 = x1 + dropout(c_proj(GELU(c_fc(ln_2(x1)))))
  Tensor a = ln_2_.forward(x1, saved.parts[2]);
  Tensor h = linear(a, w_fc_, &b_fc_);
  Tensor g = Tensor::uninitialized(h.rows(), h.cols(), h.device());
  o.gelu(g.data(), h.data(), h.size());
  round_in_place(g);
  Tensor x2 = linear(g, w_out_, &b_out_);
  drop_in_place(x2, p_, dropout_seed_, pass, tensor_ + 2);
  axpy(1.0f, x1, x2);
  round_in_place(x2);
  saved.tensors.push_back(std::move(a));
  saved.tensors.push_back(std::move(h));
  saved.tensors.push_back(std::move(g));
  return x2;
}

Tensor Block::backward(const Tensor& dy, const Pass& pass, const Saved& saved) {
  if (saved.tensors.size() != 3 || saved.parts.size() != 3) throw std::logic_error("Block: backward without its forward's saved activations");
  const Tensor &a = saved.tensors[0], &h = saved.tensors[1], &g = saved.tensors[2];
  detail::check_like(dy, a, "Block backward: dy and the block's activations");
  const detail::Ops& o = ops_of(dy);
  // The MLP branch; the residual passes dy on unchanged.
  Tensor branch = dy.clone();
  drop_in_place(branch, p_, dropout_seed_, pass, tensor_ + 2);
  const Tensor dg = linear_backward(branch, g, w_out_, &b_out_);
  Tensor dh = Tensor::uninitialized(h.rows(), h.cols(), h.device());
  o.gelu_backward(dh.data(), dg.data(), h.data(), h.size());
  round_in_place(dh);
  Tensor dx1 = ln_2_.backward(linear_backward(dh, a, w_fc_, &b_fc_), saved.parts[2]);
  axpy(1.0f, dy, dx1);
  round_in_place(dx1);
  // The attention branch.
  branch = dx1.clone();
  drop_in_place(branch, p_, dropout_seed_, pass, tensor_ + 1);
  Tensor dx = ln_1_.backward(attn_.backward(branch, pass, saved.parts[1]), saved.parts[0]);
  axpy(1.0f, dx1, dx);
  round_in_place(dx);
  return dx;
}

double Block::forward_flops(std::size_t rows, std::size_t T) const {
  const double r = static_cast<double>(rows), d = static_cast<double>(width_);
  return 2.0 * ln_1_.forward_flops(rows) + attn_.forward_flops(rows, T) + 2.0 * 2.0 * r * d * 4.0 * d + 20.0 * r * 4.0 * d;
}

std::size_t Block::saved_floats(std::size_t rows, std::size_t T) const {
  return ln_1_.saved_floats(rows) + attn_.saved_floats(rows, T) + ln_2_.saved_floats(rows) + rows * 9 * width_;
}

// ---------------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------------

GPTConfig GPTConfig::tiny() { return GPTConfig{}; }

std::size_t GPTConfig::parameter_count() const {
  const std::size_t d = width;
  return vocab * d + context * d + layers * (12 * d * d + 13 * d) + 2 * d;
}

void GPTConfig::validate() const {
  const auto fail = [](const std::string& what) { throw std::invalid_argument("GPTConfig: " + what); };
  if (vocab == 0 || context == 0 || layers == 0 || heads == 0 || width == 0) fail("vocab, context, layers, heads and width must be at least 1");
  if (width % heads != 0) fail("width " + std::to_string(width) + " is not a multiple of heads " + std::to_string(heads));
  if (!(dropout >= 0.0f && dropout < 1.0f)) fail("dropout must be in [0, 1) (got " + std::to_string(dropout) + ")");
}

namespace {
const GPTConfig& validated(const GPTConfig& c) {
  c.validate();
  return c;
}
}  // namespace

GPT::GPT(const GPTConfig& config, std::uint64_t seed, Device device)
    : config_(validated(config)),
      device_(device),
      seed_(seed),
      embedding_(config.vocab, config.context, config.width, sub_seed(seed, 1), "", device),
      ln_f_(config.width, 1e-5f, "ln_f.", device) {
  embedding_.token().name = "wte.weight";
  embedding_.position().name = "wpe.weight";
  blocks_.reserve(config.layers);
  for (std::size_t i = 0; i < config.layers; ++i) {
    blocks_.emplace_back(config.width, config.heads, config.layers, sub_seed(seed, 100 + i), config.dropout, static_cast<std::uint32_t>(1 + 3 * i),
                         seed, "h." + std::to_string(i) + ".", device);
  }
}

std::vector<Parameter*> GPT::parameters() {
  std::vector<Parameter*> all = embedding_.parameters();
  for (Block& b : blocks_) {
    for (Parameter* p : b.parameters()) all.push_back(p);
  }
  for (Parameter* p : ln_f_.parameters()) all.push_back(p);
  return all;
}

void GPT::zero_grad() {
  for (Parameter* p : parameters()) {
    if (p->frozen) continue;
    ensure_grad(*p);
    p->grad.fill(0.0f);
  }
}

void GPT::check_batch(const TokenBatch& batch) const {
  const std::size_t T = batch.pass.T;
  if (T == 0 || T > config_.context) {
    throw std::invalid_argument("GPT: sequences of " + std::to_string(T) + " tokens (the context holds " + std::to_string(config_.context) + ")");
  }
}

Tensor GPT::forward(const TokenBatch& batch, std::vector<Saved>& saved, std::size_t first, std::size_t last, const Tensor& x) const {
  last = std::min(last, units());
  if (first > last) throw std::invalid_argument("GPT::forward: first unit after the last");
  check_batch(batch);
  saved.resize(units());
  if (first == last) return x.clone();
  const Pass& pass = batch.pass;
  if (first > 0 && (x.cols() != config_.width || x.rows() % pass.T != 0 || x.device() != device_)) {
    throw std::invalid_argument("GPT::forward from unit " + std::to_string(first) + ": its input must be (B·T) × " + std::to_string(config_.width) +
                                " on the " + to_string(device_) + ", got " + x.shape());
  }
  Tensor h;
  const Tensor* in = &x;
  for (std::size_t u = first; u < last; ++u) {
    saved[u].clear();
    Tensor out;
    if (u == 0) {
      out = embedding_.forward(batch.tokens, pass.T);
      drop_in_place(out, config_.dropout, seed_, pass, 0);
    } else if (u <= blocks_.size()) {
      out = blocks_[u - 1].forward(*in, pass, saved[u]);
    } else {  // ln_f and the head, tied to the token table: logits = ln_f(x)·wteᵀ
      saved[u].parts.resize(1);
      Tensor a = ln_f_.forward(*in, saved[u].parts[0]);
      const Tensor& wte = embedding_.token().value;
      out = Tensor::uninitialized(a.rows(), wte.rows(), device_);
      gemm(a, false, wte, true, out);
      round_in_place(out);
      saved[u].tensors.push_back(std::move(a));
    }
    h = std::move(out);
    in = &h;
  }
  return h;
}

Tensor GPT::backward(const TokenBatch& batch, const Tensor& dy, const std::vector<Saved>& saved, const GradReadyHook& ready,
                     const BackwardDoneHook& done, std::size_t first, std::size_t last) {
  last = std::min(last, units());
  if (first > last || saved.size() < last) throw std::invalid_argument("GPT::backward: units [first, last) and their saved activations");
  check_batch(batch);
  const Pass& pass = batch.pass;
  const auto announce = [&ready](std::vector<Parameter*> params) {
    if (!ready) return;
    for (auto it = params.rbegin(); it != params.rend(); ++it) {
      if (!(*it)->frozen) ready(**it);
    }
  };
  Tensor g = first == last ? dy.clone() : Tensor();
  const Tensor* in = &dy;
  for (std::size_t u = last; u-- > first;) {
    if (u > 0 && saved[u].tensors.empty()) {
      throw std::invalid_argument("GPT::backward: unit " + std::to_string(u) +
                                  " has no saved activations: its forward did not run, or they were dropped and not recomputed");
    }
    Tensor dx;
    if (u == units() - 1) {
      const Tensor& a = saved[u].tensors[0];
      if (in->rows() != a.rows() || in->cols() != config_.vocab || in->device() != device_) {
        throw std::invalid_argument("GPT::backward: dlogits " + in->shape() + " for " + std::to_string(a.rows()) + " rows of " + std::to_string(config_.vocab) + " logits");
      }
      Parameter& wte = embedding_.token();
      if (!wte.frozen) {  // the head's share of the tied table: dwte += dlogitsᵀ·a
        ensure_grad(wte);
        gemm(*in, true, a, false, wte.grad, 1.0f, 1.0f);
        round_in_place(wte.grad);
      }
      Tensor da = Tensor::uninitialized(a.rows(), config_.width, device_);
      gemm(*in, false, wte.value, false, da);
      round_in_place(da);
      dx = ln_f_.backward(da, saved[u].parts.at(0));
      announce(ln_f_.parameters());  // wte waits for unit 0
    } else if (u > 0) {
      dx = blocks_[u - 1].backward(*in, pass, saved[u]);
      announce(blocks_[u - 1].parameters());
    } else {
      Tensor d = in->clone();
      drop_in_place(d, config_.dropout, seed_, pass, 0);
      embedding_.backward(d, batch.tokens, pass.T);
      announce(embedding_.parameters());
    }
    g = std::move(dx);
    in = &g;
  }
  if (done) done();
  return g;
}

double GPT::forward_flops(std::size_t rows, std::size_t T) const {
  double f = 0.0;
  for (const Block& b : blocks_) f += b.forward_flops(rows, T);
  return f + ln_f_.forward_flops(rows) + 2.0 * static_cast<double>(rows) * static_cast<double>(config_.width) * static_cast<double>(config_.vocab);
}

// ---------------------------------------------------------------------------------------------
// Generation
// ---------------------------------------------------------------------------------------------

int GPT::pick(const Tensor& logits, const Sampling& sampling, std::size_t draw) const {
  const std::vector<float> z = logits.to_host();
  const std::size_t V = config_.vocab, row = z.size() / V - 1;  // the last row: the next token
  const float* zr = z.data() + row * V;
  const std::size_t best = static_cast<std::size_t>(std::max_element(zr, zr + V) - zr);  // the first maximum
  if (!(sampling.temperature > 0.0f)) return static_cast<int>(best);
  std::vector<double> weight(V);
  double total = 0.0;
  for (std::size_t j = 0; j < V; ++j) total += weight[j] = std::exp((static_cast<double>(zr[j]) - zr[best]) / sampling.temperature);
  // The draw-th uniform of a SplitMix64 stream keyed by the sampling seed: 53 bits in [0, 1).
  const std::uint64_t bits = detail::mix64(detail::mix64(sampling.seed + detail::kGolden) + (draw + 1) * detail::kGolden);
  const double u = static_cast<double>(bits >> 11) * 0x1p-53 * total;
  double cumulative = 0.0;
  for (std::size_t j = 0; j < V; ++j) {
    cumulative += weight[j];
    if (u < cumulative) return static_cast<int>(j);
  }
  return static_cast<int>(best);  // u rounded up to the total
}

namespace {
void check_generation(const GPTConfig& c, const std::vector<int>& prompt, std::size_t count) {
  if (prompt.empty() || prompt.size() + count > c.context) {
    throw std::invalid_argument("GPT::generate: a prompt of " + std::to_string(prompt.size()) + " tokens and " + std::to_string(count) +
                                " more must fit the context of " + std::to_string(c.context) + " (and the prompt must not be empty)");
  }
}
}  // namespace

std::vector<int> GPT::generate_reference(const std::vector<int>& prompt, std::size_t count, const Sampling& sampling) {
  check_generation(config_, prompt, count);
  TokenBatch batch{prompt, Pass{prompt.size(), 0, false}};
  std::vector<int> out;
  std::vector<Saved> saved;
  for (std::size_t n = 0; n < count; ++n) {
    batch.pass.T = batch.tokens.size();
    const int next = pick(forward(batch, saved), sampling, n);
    out.push_back(next);
    batch.tokens.push_back(next);
  }
  return out;
}

std::vector<int> GPT::generate(const std::vector<int>& prompt, std::size_t count, const Sampling& sampling) {
  check_generation(config_, prompt, count);
  KVCache cache;
  Tensor logits;
  for (const int t : prompt) logits = decode(cache, t);
  std::vector<int> out;
  for (std::size_t n = 0; n < count; ++n) {
    out.push_back(pick(logits, sampling, n));
    if (n + 1 < count) logits = decode(cache, out.back());
  }
  return out;
}

Tensor GPT::decode(KVCache& cache, int token) {
  const std::size_t d = config_.width, H = config_.heads, hd = d / H, ctx = config_.context;
  if (cache.keys.empty() && cache.values.empty()) {
    for (std::size_t l = 0; l < blocks_.size(); ++l) {
      cache.keys.emplace_back(H * ctx, hd, device_);
      cache.values.emplace_back(H * ctx, hd, device_);
    }
    cache.length = 0;
  }
  if (cache.keys.size() != blocks_.size() || cache.values.size() != blocks_.size()) throw std::invalid_argument("GPT::decode: a cache for another model");
  if (cache.length >= ctx) throw std::invalid_argument("GPT::decode: the cache holds the whole context (" + std::to_string(ctx) + " tokens)");
  if (token < 0 || static_cast<std::size_t>(token) >= config_.vocab) throw std::invalid_argument("GPT::decode: token " + std::to_string(token) + " outside the vocabulary");
  const std::size_t t = cache.length;
  const detail::Ops& o = detail::ops_for(device_);
  Tensor x = Tensor::uninitialized(1, d, device_);
  o.embed(x.data(), embedding_.token().value.data(), embedding_.position().value.data() + t * d, &token, 1, 1, d);
  round_in_place(x);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (std::size_t l = 0; l < blocks_.size(); ++l) {
    const Block& b = blocks_[l];
    const CausalSelfAttention& at = b.attn_;
    Saved scratch;
    const Tensor qkv = linear(b.ln_1_.forward(x, scratch), at.w_attn_, &at.b_attn_);
    float* keys = cache.keys[l].data();
    float* values = cache.values[l].data();
    for (std::size_t h = 0; h < H; ++h) {  // this position's key and value, head by head
      o.copy(keys + (h * ctx + t) * hd, qkv.data() + d + h * hd, hd);
      o.copy(values + (h * ctx + t) * hd, qkv.data() + 2 * d + h * hd, hd);
    }
    // One query row per head against the t + 1 cached keys (Q is the first d columns of qkv:
    // for one row, its heads are already head by head).
    Tensor s = Tensor::uninitialized(H, t + 1, device_);
    o.gemm_batched(false, true, 1, t + 1, hd, 1.0f, qkv.data(), hd, keys, ctx * hd, 0.0f, s.data(), t + 1, H);
    o.causal_softmax(s.data(), s.data(), H, 1, t + 1, t, scale);
    round_in_place(s);
    Tensor merged = Tensor::uninitialized(1, d, device_);  // 1 × (H·hd): head h's output at columns h·hd …
    o.gemm_batched(false, false, 1, hd, t + 1, 1.0f, s.data(), t + 1, values, ctx * hd, 0.0f, merged.data(), hd, H);
    round_in_place(merged);
    Tensor x1 = linear(merged, at.w_proj_, &at.b_proj_);
    axpy(1.0f, x, x1);
    round_in_place(x1);
    const Tensor hidden = linear(b.ln_2_.forward(x1, scratch), b.w_fc_, &b.b_fc_);
    Tensor g = Tensor::uninitialized(1, 4 * d, device_);
    o.gelu(g.data(), hidden.data(), hidden.size());
    round_in_place(g);
    x = linear(g, b.w_out_, &b.b_out_);
    axpy(1.0f, x1, x);
    round_in_place(x);
  }
  Saved scratch;
  const Tensor a = ln_f_.forward(x, scratch);
  const Tensor& wte = embedding_.token().value;
  Tensor logits = Tensor::uninitialized(1, config_.vocab, device_);
  gemm(a, false, wte, true, logits);
  round_in_place(logits);
  ++cache.length;
  return logits;
}

void attend(const float* query, const float* const* keys, const float* const* values, std::size_t n, std::size_t hd, float scale, float* out) {
  if (n == 0) throw std::invalid_argument("attend: no positions to attend to");
  std::vector<float> p(n);
  float top = -std::numeric_limits<float>::infinity();
  for (std::size_t j = 0; j < n; ++j) {
    float dot = 0.0f;
    for (std::size_t c = 0; c < hd; ++c) dot += query[c] * keys[j][c];
    p[j] = dot * scale;
    top = std::max(top, p[j]);
  }
  float total = 0.0f;
  for (std::size_t j = 0; j < n; ++j) total += p[j] = std::exp(p[j] - top);
  const float inverse = 1.0f / total;
  for (std::size_t c = 0; c < hd; ++c) out[c] = 0.0f;
  for (std::size_t j = 0; j < n; ++j) {
    const float w = p[j] * inverse;
    for (std::size_t c = 0; c < hd; ++c) out[c] += w * values[j][c];
  }
}

Tensor GPT::decode_rows(const std::vector<DecodeRow>& rows, KVStore& store) const {
  if (device_ != Device::kHost) throw std::invalid_argument("GPT::decode_rows: host models only (a KVStore reads host memory)");
  const std::size_t d = config_.width, n = rows.size();
  for (const DecodeRow& r : rows) {
    if (r.position >= config_.context) {
      throw std::invalid_argument("GPT::decode_rows: position " + std::to_string(r.position) + " of sequence " + std::to_string(r.sequence) +
                                  " past the context of " + std::to_string(config_.context));
    }
    if (r.token < 0 || static_cast<std::size_t>(r.token) >= config_.vocab) {
      throw std::invalid_argument("GPT::decode_rows: token " + std::to_string(r.token) + " outside the vocabulary");
    }
  }
  const detail::Ops& o = detail::ops_for(device_);
  std::vector<Tensor> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = Tensor::uninitialized(1, d, device_);
    o.embed(x[i].data(), embedding_.token().value.data(), embedding_.position().value.data() + rows[i].position * d, &rows[i].token, 1, 1, d);
    round_in_place(x[i]);
  }
  Saved scratch;
  std::vector<Tensor> qkv(n);
  for (std::size_t l = 0; l < blocks_.size(); ++l) {
    const Block& b = blocks_[l];
    const CausalSelfAttention& at = b.attn_;
    for (std::size_t i = 0; i < n; ++i) {  // every row's key and value first: later rows of a chunk read them
      qkv[i] = linear(b.ln_1_.forward(x[i], scratch), at.w_attn_, &at.b_attn_);
      store.append(rows[i], l, qkv[i].data() + d, qkv[i].data() + 2 * d);
    }
    for (std::size_t i = 0; i < n; ++i) {
      Tensor merged(1, d, device_);  // head h's output at columns h·hd …
      store.attend(rows[i], l, qkv[i].data(), merged.data());
      round_in_place(merged);
      Tensor x1 = linear(merged, at.w_proj_, &at.b_proj_);
      axpy(1.0f, x[i], x1);
      round_in_place(x1);
      const Tensor hidden = linear(b.ln_2_.forward(x1, scratch), b.w_fc_, &b.b_fc_);
      Tensor g = Tensor::uninitialized(1, 4 * d, device_);
      o.gelu(g.data(), hidden.data(), hidden.size());
      round_in_place(g);
      x[i] = linear(g, b.w_out_, &b.b_out_);
      axpy(1.0f, x1, x[i]);
      round_in_place(x[i]);
    }
  }
  Tensor logits = Tensor::uninitialized(n, config_.vocab, device_);
  const Tensor& wte = embedding_.token().value;
  for (std::size_t i = 0; i < n; ++i) {
    const Tensor a = ln_f_.forward(x[i], scratch);
    Tensor row = Tensor::view(logits.data() + i * config_.vocab, 1, config_.vocab, device_);
    gemm(a, false, wte, true, row);
  }
  round_in_place(logits);
  return logits;
}

}  // namespace gpulab::nn
