/// @file test_gpt.cpp
/// @brief gpulab::nn's GPT (gpulab/nn_gpt.hpp): attention worked by hand; every gradient against
/// central differences of an independent fp64 GPT written out below (with dropout too); the causal
/// mask bit for bit; replayable dropout under checkpointing; the hooks and unit slices; training
/// on the lessons lowers the validation loss; generation with the KV cache equals the reference
/// path; host and device within bounds ([gpu]).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpulab/nn_gpt.hpp"
#include "gpulab/random.hpp"

namespace nn = gpulab::nn;

namespace {

using Values = std::map<std::string, std::vector<double>>;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

/// Every parameter's values by name, in fp64.
Values values_of(nn::GPT& model) {
  Values v;
  for (nn::Parameter* p : model.parameters()) v[p->name] = widen(p->value.to_host());
  return v;
}

/// Random tokens.
std::vector<int> random_tokens(std::size_t n, std::size_t vocab, std::uint64_t seed) {
  gpulab::Rng rng(seed);
  std::vector<int> t(n);
  for (int& x : t) x = static_cast<int>(rng.integer(0, static_cast<std::int64_t>(vocab) - 1));
  return t;
}

/// A GPT's shape, in one line.
nn::GPTConfig config(std::size_t layers, std::size_t heads, std::size_t width, std::size_t vocab, std::size_t context, float dropout = 0.0f) {
  nn::GPTConfig c;
  c.layers = layers;
  c.heads = heads;
  c.width = width;
  c.vocab = vocab;
  c.context = context;
  c.dropout = dropout;
  return c;
}

/// One step's gradients from zero: forward, the mean cross-entropy against @p targets, backward
/// (with the hooks). Returns the loss.
double train_pass(nn::GPT& model, const nn::TokenBatch& batch, const std::vector<int>& targets, const nn::GradReadyHook& ready = {},
                  const nn::BackwardDoneHook& done = {}) {
  model.zero_grad();
  std::vector<nn::Saved> saved;
  nn::Tensor dlogits;
  const double loss = nn::softmax_cross_entropy(model.forward(batch, saved), targets, &dlogits);
  model.backward(batch, dlogits, saved, ready, done);
  return loss;
}

/// Every parameter's gradient, one after the other in parameter order.
std::vector<float> all_gradients(nn::GPT& model) {
  std::vector<float> all;
  for (nn::Parameter* p : model.parameters()) {
    const std::vector<float> g = p->grad.to_host();
    all.insert(all.end(), g.begin(), g.end());
  }
  return all;
}

/// Gives every LayerNorm γ and β and every bias values away from their 1 and 0 starts, so that
/// the gradient check sees them act (a bias of 0 would hide a bias applied twice).
void perturb(nn::GPT& model, std::uint64_t seed) {
  gpulab::Rng rng(seed);
  for (nn::Parameter* p : model.parameters()) {
    const bool ln = p->name.find("ln_") != std::string::npos;
    const bool bias = p->name.size() > 4 && p->name.compare(p->name.size() - 4, 4, "bias") == 0;
    if (!ln && !bias) continue;
    std::vector<float> v = p->value.to_host();
    for (float& x : v) x += static_cast<float>(rng.uniform(-0.2, 0.2));
    p->value.assign(v);
  }
}

// ---------------------------------------------------------------------------------------------
// An independent fp64 GPT: the documented function written out with plain loops (no code shared
// with the library but the dropout mask's definition, dropout_keeps, itself tested on its own).
// ---------------------------------------------------------------------------------------------

struct Gpt64 {
  nn::GPTConfig c;
  std::uint64_t seed = 0;  // the model's seed: it keys the dropout masks
  nn::Pass pass;
  Values w;

  const std::vector<double>& at(const std::string& name) const { return w.at(name); }

  /// The factor dropout applies to element i of tensor id @p tensor: 0, or 1 / (1 − p).
  double keep(std::uint32_t tensor, std::uint64_t i) const {
    if (!pass.training || c.dropout == 0.0f) return 1.0;
    return nn::dropout_keeps(nn::DropoutStream{seed, pass.step, tensor, c.dropout}, i) ? 1.0 / (1.0 - static_cast<double>(c.dropout)) : 0.0;
  }

  static std::vector<double> layernorm(const std::vector<double>& x, std::size_t rows, std::size_t d, const std::vector<double>& g,
                                       const std::vector<double>& b) {
    std::vector<double> y(x.size());
    for (std::size_t r = 0; r < rows; ++r) {
      double mean = 0.0, var = 0.0;
      for (std::size_t k = 0; k < d; ++k) mean += x[r * d + k] / static_cast<double>(d);
      for (std::size_t k = 0; k < d; ++k) var += (x[r * d + k] - mean) * (x[r * d + k] - mean) / static_cast<double>(d);
      for (std::size_t k = 0; k < d; ++k) y[r * d + k] = (x[r * d + k] - mean) / std::sqrt(var + 1e-5) * g[k] + b[k];
    }
    return y;
  }

  /// x (rows × in) · W (in × out) + b.
  static std::vector<double> affine(const std::vector<double>& x, std::size_t rows, const std::vector<double>& W, const std::vector<double>& b) {
    const std::size_t out = b.size(), in = W.size() / out;
    std::vector<double> y(rows * out);
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t j = 0; j < out; ++j) {
        double s = b[j];
        for (std::size_t k = 0; k < in; ++k) s += x[r * in + k] * W[k * out + j];
        y[r * out + j] = s;
      }
    }
    return y;
  }

  /// Causal attention of @p x (rows = B·T) with the named parameters, attention dropout's id @p tensor.
  std::vector<double> attention(const std::vector<double>& x, std::size_t rows, const std::string& name, std::uint32_t tensor) const {
    const std::size_t d = c.width, H = c.heads, hd = d / H, T = pass.T, B = rows / T;
    const std::vector<double> qkv = affine(x, rows, at(name + "c_attn.weight"), at(name + "c_attn.bias"));
    std::vector<double> o(rows * d, 0.0);
    for (std::size_t b = 0; b < B; ++b) {
      for (std::size_t h = 0; h < H; ++h) {
        for (std::size_t i = 0; i < T; ++i) {
          const double* q = &qkv[(b * T + i) * 3 * d + h * hd];
          std::vector<double> s(i + 1);
          for (std::size_t j = 0; j <= i; ++j) {
            const double* k = &qkv[(b * T + j) * 3 * d + d + h * hd];
            s[j] = 0.0;
            for (std::size_t e = 0; e < hd; ++e) s[j] += q[e] * k[e];
            s[j] /= std::sqrt(static_cast<double>(hd));
          }
          const double top = *std::max_element(s.begin(), s.end());
          double sum = 0.0;
          for (double& v : s) sum += v = std::exp(v - top);
          for (std::size_t j = 0; j <= i; ++j) {
            const double p = s[j] / sum * keep(tensor, ((b * H + h) * T + i) * T + j);
            const double* v = &qkv[(b * T + j) * 3 * d + 2 * d + h * hd];
            for (std::size_t e = 0; e < hd; ++e) o[(b * T + i) * d + h * hd + e] += p * v[e];
          }
        }
      }
    }
    return affine(o, rows, at(name + "c_proj.weight"), at(name + "c_proj.bias"));
  }

  std::vector<double> block(std::vector<double> x, std::size_t rows, std::size_t l) const {
    const std::string n = "h." + std::to_string(l) + ".";
    const std::uint32_t id = static_cast<std::uint32_t>(1 + 3 * l);
    const std::vector<double> y = attention(layernorm(x, rows, c.width, at(n + "ln_1.weight"), at(n + "ln_1.bias")), rows, n + "attn.", id);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += y[i] * keep(id + 1, i);
    std::vector<double> h = affine(layernorm(x, rows, c.width, at(n + "ln_2.weight"), at(n + "ln_2.bias")), rows, at(n + "mlp.c_fc.weight"),
                                   at(n + "mlp.c_fc.bias"));
    for (double& v : h) v = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    const std::vector<double> z = affine(h, rows, at(n + "mlp.c_proj.weight"), at(n + "mlp.c_proj.bias"));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += z[i] * keep(id + 2, i);
    return x;
  }

  /// The mean cross-entropy of the next tokens.
  double loss(const std::vector<int>& tokens, const std::vector<int>& targets) const {
    const std::size_t d = c.width, rows = tokens.size(), V = c.vocab;
    std::vector<double> x(rows * d);
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t k = 0; k < d; ++k) {
        const std::size_t i = r * d + k;
        x[i] = (at("wte.weight")[static_cast<std::size_t>(tokens[r]) * d + k] + at("wpe.weight")[(r % pass.T) * d + k]) * keep(0, i);
      }
    }
    for (std::size_t l = 0; l < c.layers; ++l) x = block(x, rows, l);
    const std::vector<double> a = layernorm(x, rows, d, at("ln_f.weight"), at("ln_f.bias"));
    double total = 0.0;
    for (std::size_t r = 0; r < rows; ++r) {
      std::vector<double> z(V, 0.0);
      for (std::size_t v = 0; v < V; ++v) {
        for (std::size_t k = 0; k < d; ++k) z[v] += a[r * d + k] * at("wte.weight")[v * d + k];
      }
      const double top = *std::max_element(z.begin(), z.end());
      double sum = 0.0;
      for (const double v : z) sum += std::exp(v - top);
      total += std::log(sum) + top - z[static_cast<std::size_t>(targets[r])];
    }
    return total / static_cast<double>(rows);
  }
};

/// The library's loss and gradients for one batch, and the fp64 model's loss and central
/// differences for up to @p per_tensor elements of every parameter (all of them when small).
/// Returns the number of elements checked; reports each disagreement.
std::size_t check_gpt_gradients(const nn::GPTConfig& config, std::size_t B, std::size_t T, const nn::Pass& pass, std::size_t per_tensor) {
  const std::uint64_t seed = 7 + B * 100 + T;
  nn::GPT model(config, seed);
  perturb(model, seed + 1);
  nn::TokenBatch batch{random_tokens(B * T, config.vocab, seed + 2), pass};
  batch.pass.T = T;
  const std::vector<int> targets = random_tokens(B * T, config.vocab, seed + 3);
  model.zero_grad();
  std::vector<nn::Saved> saved;
  const nn::Tensor logits = model.forward(batch, saved);
  nn::Tensor dlogits;
  const double loss = nn::softmax_cross_entropy(logits, targets, &dlogits);
  const nn::Tensor dx = model.backward(batch, dlogits, saved);
  CHECK(dx.empty());  // tokens have no gradient

  Gpt64 ref{config, seed, batch.pass, values_of(model)};
  const double want = ref.loss(batch.tokens, targets);
  INFO("config: " << config.layers << " layers, " << config.heads << " heads, d = " << config.width << ", vocab " << config.vocab << ", B = " << B
                  << ", T = " << T << ", dropout " << config.dropout << (pass.training ? " (training)" : " (evaluation)"));
  // The two compute one function: the loss agrees to fp32 rounding through a few dozen operations.
  CHECK(loss == Approx(want).epsilon(1e-5));

  // Central differences in fp64 with h = 1e-6: truncation h²·|f'''| and cancellation 1e-16·|L|/h
  // are both below 1e-10. The library's fp32 gradient: sums of at most 4d + T terms (≤ 60 here)
  // through about 30 operations deep, each term within a few u = 6e-8 of exact: 30·60·u ≈ 1e-4 of
  // the scale of the terms, which the largest |gradient| of the tensor stands for. Mutants (a
  // wrong variance, the mask off by one, 1/d for 1/√d, dropout not rescaled) are off by 10–100 %.
  const double h = 1e-6;
  std::size_t checked = 0, wrong = 0;
  double worst = 0.0;
  gpulab::Rng pick(seed + 4);
  for (nn::Parameter* p : model.parameters()) {
    const std::vector<float> grad = p->grad.to_host();
    std::vector<double>& values = ref.w.at(p->name);
    REQUIRE(grad.size() == values.size());
    std::vector<std::size_t> which(values.size());
    std::iota(which.begin(), which.end(), std::size_t{0});
    if (which.size() > per_tensor) {
      for (std::size_t i = 0; i < per_tensor; ++i) std::swap(which[i], which[i + static_cast<std::size_t>(pick.integer(0, static_cast<std::int64_t>(which.size() - i - 1)))]);
      which.resize(per_tensor);
    }
    std::vector<double> fd;
    for (const std::size_t i : which) {
      const double keep = values[i];
      values[i] = keep + h;
      const double up = ref.loss(batch.tokens, targets);
      values[i] = keep - h;
      const double down = ref.loss(batch.tokens, targets);
      values[i] = keep;
      fd.push_back((up - down) / (2 * h));
    }
    double scale = 0.0;
    for (const double v : fd) scale = std::max(scale, std::abs(v));
    for (std::size_t k = 0; k < which.size(); ++k) {
      const double diff = std::abs(grad[which[k]] - fd[k]);
      worst = std::max(worst, diff / (scale + 1e-30));
      ++checked;
      if (diff > 1e-4 * (scale + std::abs(fd[k])) + 1e-9) {
        if (++wrong <= 6) UNSCOPED_INFO(p->name << "[" << which[k] << "]: library " << grad[which[k]] << ", central difference " << fd[k]);
      }
    }
  }
  INFO("largest difference, relative to its tensor's largest gradient: " << worst);
  CHECK(wrong == 0);
  return checked;
}

/// The fixed evaluation batches of the validation text.
std::vector<nn::Windows> evaluation_batches(const std::vector<std::uint8_t>& text, std::size_t T, std::size_t batches, std::size_t B) {
  std::vector<nn::Windows> all;
  for (std::size_t k = 0; k < batches; ++k) all.push_back(nn::sample_windows(text, T, B, 99, k));
  return all;
}

/// The mean cross-entropy of @p model's next-byte predictions over @p batches (no dropout).
double evaluation_loss(nn::GPT& model, const std::vector<nn::Windows>& batches) {
  double total = 0.0;
  std::vector<nn::Saved> saved;
  for (const nn::Windows& w : batches) {
    const nn::TokenBatch batch{w.inputs, nn::Pass{w.context, 0, false}};
    total += nn::softmax_cross_entropy(model.forward(batch, saved), w.targets, nullptr);
  }
  return total / static_cast<double>(batches.size());
}

/// The same loss for the best model that ignores the context: each byte predicted with its
/// frequency in @p train (add-one smoothed).
double unigram_loss(const std::vector<std::uint8_t>& train, const std::vector<nn::Windows>& batches) {
  std::vector<double> count(256, 1.0);
  for (const std::uint8_t b : train) count[b] += 1.0;
  const double total = static_cast<double>(train.size()) + 256.0;
  double loss = 0.0;
  std::size_t n = 0;
  for (const nn::Windows& w : batches) {
    for (const int t : w.targets) {
      loss -= std::log(count[static_cast<std::size_t>(t)] / total);
      ++n;
    }
  }
  return loss / static_cast<double>(n);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// By hand
// ---------------------------------------------------------------------------------------------

TEST_CASE("GPT attention on 2 tokens with 1 head and d = 4 worked by hand", "[cpu]") {
  // x = (e0, e1); W_attn = [I | I | 2I], so q_i = k_i = e_i and v_i = 2·e_i; W_proj = I; biases 0.
  // Scores q·k/√4: s00 = 1/2 (the only key row 0 sees); s10 = 0, s11 = 1/2.
  // P row 1 = softmax(0, 1/2) = (1/(1 + e^½), e^½/(1 + e^½)) = (0.3775406688, 0.6224593312).
  // O row 0 = v0 = (2, 0, 0, 0); row 1 = 0.3775·v0 + 0.6225·v1 = (0.7550813376, 1.2449186624, 0, 0).
  // Backward from dy = (0, e0): dO = dy; dV = Pᵀ·dO: dv0 = p10·e0, dv1 = p11·e0; dP row 1 =
  // (dO·v0, dO·v1) = (2, 0); dS = ½·P⊙(dP − Σ P·dP): ds10 = p10·p11 = 0.2350037122 = −ds11;
  // dQ row 1 = ds10·k0 + ds11·k1 = (0.235, −0.235, 0, 0); dK row 0 = ds10·q1, row 1 = ds11·q1;
  // dx = dQ + dK + 2·dV: row 0 = (0.7550813376, 0.2350037122, 0, 0), row 1 = (1.4799223746, −0.4700074244, 0, 0).
  const std::size_t d = 4;
  nn::CausalSelfAttention attn(d, 1, 1, 0.02f, 0.0f, 0, 0);
  std::vector<float> w(d * 3 * d, 0.0f), proj(d * d, 0.0f);
  for (std::size_t i = 0; i < d; ++i) {
    w[i * 3 * d + i] = 1.0f;
    w[i * 3 * d + d + i] = 1.0f;
    w[i * 3 * d + 2 * d + i] = 2.0f;
    proj[i * d + i] = 1.0f;
  }
  attn.parameters()[0]->value.assign(w);
  attn.parameters()[2]->value.assign(proj);
  nn::Saved saved;
  const nn::Pass pass{2, 0, false};
  const std::vector<float> y = attn.forward(nn::Tensor::from({1, 0, 0, 0, 0, 1, 0, 0}, 2, d), pass, saved).to_host();
  const double p10 = 1.0 / (1.0 + std::exp(0.5)), p11 = 1.0 - p10;
  REQUIRE(saved.parts.size() == 1);
  REQUIRE(saved.parts[0].tensors.size() == 4);
  const std::vector<float> p = saved.parts[0].tensors[3].to_host();  // P, B·H·T × T
  const std::vector<double> want_p = {1.0, 0.0, p10, p11};
  const std::vector<double> want_y = {2, 0, 0, 0, 2 * p10, 2 * p11, 0, 0};
  for (std::size_t i = 0; i < 4; ++i) CHECK(p[i] == Approx(want_p[i]).margin(1e-7));
  for (std::size_t i = 0; i < 8; ++i) CHECK(y[i] == Approx(want_y[i]).margin(1e-6));
  CHECK(p10 == Approx(0.3775406688).epsilon(1e-10));
  const std::vector<float> dx = attn.backward(nn::Tensor::from({0, 0, 0, 0, 1, 0, 0, 0}, 2, d), pass, saved).to_host();
  const double ds = p10 * p11;
  CHECK(ds == Approx(0.2350037122).epsilon(1e-9));
  const std::vector<double> want_dx = {2 * p10, ds, 0, 0, ds + 2 * p11, -2 * ds, 0, 0};
  for (std::size_t i = 0; i < 8; ++i) CHECK(dx[i] == Approx(want_dx[i]).margin(1e-6));
  // dW_attn = xᵀ·dqkv: row 0 of W (x0 = e0) gets dqkv row 0 = (dq0, dk0, dv0) = (0; ds·e1; p10·e0).
  const std::vector<float> dw = attn.parameters()[0]->grad.to_host();
  CHECK(dw[d + 1] == Approx(ds).margin(1e-7));
  CHECK(dw[2 * d] == Approx(p10).margin(1e-7));
  // Row 1 (x1 = e1) gets dqkv row 1 = (ds·(e0 − e1); −ds·e1; p11·e0).
  CHECK(dw[3 * d + 0] == Approx(ds).margin(1e-7));
  CHECK(dw[3 * d + 1] == Approx(-ds).margin(1e-7));
  CHECK(dw[3 * d + d + 1] == Approx(-ds).margin(1e-7));
  CHECK(dw[3 * d + 2 * d] == Approx(p11).margin(1e-7));
}

// ---------------------------------------------------------------------------------------------
// Against the fp64 GPT
// ---------------------------------------------------------------------------------------------

TEST_CASE("GPT gradients equal central differences of an independent fp64 GPT at awkward shapes", "[cpu]") {
  struct Case {
    std::size_t layers, heads, width, vocab, context, B, T;
  };
  for (const Case k : {Case{2, 3, 12, 11, 7, 2, 7}, Case{1, 1, 6, 9, 7, 3, 1}, Case{1, 3, 9, 5, 8, 1, 5}}) {
    const nn::GPTConfig c = config(k.layers, k.heads, k.width, k.vocab, k.context);
    const std::size_t checked = check_gpt_gradients(c, k.B, k.T, nn::Pass{k.T, 0, true}, 60);
    CHECK(checked > 0);
  }
}

TEST_CASE("GPT gradients with dropout on equal central differences of the fp64 GPT with the same masks", "[cpu]") {
  const nn::GPTConfig c = config(2, 2, 10, 7, 6, 0.25f);
  CHECK(check_gpt_gradients(c, 2, 6, nn::Pass{6, 5, true}, 60) > 0);
}

TEST_CASE("GPT causal mask: changing a later token changes no earlier logit bit for bit", "[cpu]") {
  const nn::GPTConfig c = config(2, 3, 24, 17, 9);
  nn::GPT model(c, 5);
  const std::size_t T = 9;
  nn::TokenBatch a{random_tokens(2 * T, c.vocab, 6), nn::Pass{T, 0, false}};
  std::vector<nn::Saved> saved;
  const std::vector<float> base = model.forward(a, saved).to_host();
  for (const std::size_t k : {std::size_t{0}, std::size_t{4}, T - 1}) {
    nn::TokenBatch b = a;
    b.tokens[T + k] = (b.tokens[T + k] + 1) % static_cast<int>(c.vocab);  // sequence 1, position k
    const std::vector<float> changed = model.forward(b, saved).to_host();
    std::size_t earlier_moved = 0, later_moved = 0;
    for (std::size_t r = 0; r < 2 * T; ++r) {
      const bool same = std::memcmp(&base[r * c.vocab], &changed[r * c.vocab], c.vocab * sizeof(float)) == 0;
      const bool later = r >= T + k;
      if (!later && !same) ++earlier_moved;
      if (later && same) ++later_moved;  // a position at or after k that did not move: the token is ignored
    }
    INFO("changed position " << k << " of sequence 1");
    CHECK(earlier_moved == 0);
    CHECK(later_moved == 0);
  }
}

TEST_CASE("GPT attention on a slice of the heads is that slice of the whole bit for bit with dropout", "[cpu]") {
  // What a tensor-parallel rank computes: heads [2r, 2r + 2) of 6, from its columns of qkv.
  const std::size_t B = 3, T = 7, H = 6, hd = 5, per_rank = 2, w = H * hd;
  gpulab::Rng rng(50);
  const std::vector<float> qkv = rng.uniform_vector(B * T * 3 * w, -2.0f, 2.0f), dy = rng.uniform_vector(B * T * w, -1.0f, 1.0f);
  const nn::Pass pass{T, 9, true};
  const nn::AttentionDropout dropout{77, 4, 0.3f};
  nn::Saved whole_saved;
  const std::vector<float> whole = nn::attention_heads_forward(nn::Tensor::from(qkv, B * T, 3 * w), nn::HeadSlice{H, 0, H, hd}, pass, dropout, whole_saved).to_host();
  const std::vector<float> dwhole = nn::attention_heads_backward(nn::Tensor::from(dy, B * T, w), nn::HeadSlice{H, 0, H, hd}, pass, dropout, whole_saved).to_host();
  for (std::size_t r = 0; r < H / per_rank; ++r) {
    const std::size_t lw = per_rank * hd, c0 = r * lw;  // this rank's columns within each third
    std::vector<float> local(B * T * 3 * lw), dlocal(B * T * lw);
    for (std::size_t row = 0; row < B * T; ++row) {
      for (std::size_t third = 0; third < 3; ++third) {
        for (std::size_t c = 0; c < lw; ++c) local[row * 3 * lw + third * lw + c] = qkv[row * 3 * w + third * w + c0 + c];
      }
      for (std::size_t c = 0; c < lw; ++c) dlocal[row * lw + c] = dy[row * w + c0 + c];
    }
    const nn::HeadSlice slice{per_rank, r * per_rank, H, hd};
    nn::Saved saved;
    const std::vector<float> y = nn::attention_heads_forward(nn::Tensor::from(local, B * T, 3 * lw), slice, pass, dropout, saved).to_host();
    const std::vector<float> dq = nn::attention_heads_backward(nn::Tensor::from(dlocal, B * T, lw), slice, pass, dropout, saved).to_host();
    std::size_t differ = 0, differ_grad = 0;
    for (std::size_t row = 0; row < B * T; ++row) {
      for (std::size_t c = 0; c < lw; ++c) {
        if (std::memcmp(&y[row * lw + c], &whole[row * w + c0 + c], sizeof(float)) != 0) ++differ;
        for (std::size_t third = 0; third < 3; ++third) {
          if (std::memcmp(&dq[row * 3 * lw + third * lw + c], &dwhole[row * 3 * w + third * w + c0 + c], sizeof(float)) != 0) ++differ_grad;
        }
      }
    }
    INFO("rank " << r << ": heads " << slice.first << " and " << slice.first + 1);
    CHECK(differ == 0);
    CHECK(differ_grad == 0);
  }
  nn::Saved saved;
  CHECK_THROWS_WITH(nn::attention_heads_forward(nn::Tensor::from(qkv, B * T, 3 * w), nn::HeadSlice{H, 1, H, hd}, pass, dropout, saved),
                    Catch::Contains("heads [1, 7) of 6"));
}

// ---------------------------------------------------------------------------------------------
// Dropout in the model
// ---------------------------------------------------------------------------------------------

TEST_CASE("GPT dropout: a checkpointed recompute is bit for bit and other steps differ and evaluation is the p = 0 model", "[cpu]") {
  const nn::GPTConfig c = config(3, 2, 16, 13, 8, 0.2f);
  nn::GPT model(c, 21);
  const nn::TokenBatch batch{random_tokens(3 * 8, c.vocab, 22), nn::Pass{8, 4, true}};
  const std::vector<int> targets = random_tokens(3 * 8, c.vocab, 23);
  (void)train_pass(model, batch, targets);  // straight through
  const std::vector<float> straight = all_gradients(model);
  // Unit by unit, keeping only each unit's input, then every block recomputed before backward.
  model.zero_grad();
  std::vector<nn::Saved> kept;
  std::vector<nn::Tensor> inputs;
  nn::Tensor x = model.forward(batch, kept, 0, 1);
  for (std::size_t u = 1; u < model.units(); ++u) {
    inputs.push_back(x.clone());
    x = model.forward(batch, kept, u, u + 1, x);
    if (u < model.units() - 1) kept[u].clear();  // checkpointing: the block's activations dropped
  }
  nn::Tensor dl;
  (void)nn::softmax_cross_entropy(x, targets, &dl);
  nn::Tensor g = model.backward(batch, dl, kept, {}, {}, model.units() - 1, model.units());
  for (std::size_t u = model.units() - 1; u-- > 1;) {
    (void)model.forward(batch, kept, u, u + 1, inputs[u - 1]);  // the recompute makes the same masks
    g = model.backward(batch, g, kept, {}, {}, u, u + 1);
  }
  model.backward(batch, g, kept, {}, {}, 0, 1);
  CHECK(same_bits(all_gradients(model), straight));
  // Another step draws other masks; evaluation drops nothing and is the model without dropout.
  std::vector<nn::Saved> saved;
  nn::TokenBatch other = batch;
  other.pass.step = 5;
  const std::vector<float> step4 = model.forward(batch, saved).to_host(), step5 = model.forward(other, saved).to_host();
  CHECK_FALSE(same_bits(step4, step5));
  nn::TokenBatch eval = batch;
  eval.pass.training = false;
  nn::GPTConfig no_dropout = c;
  no_dropout.dropout = 0.0f;
  nn::GPT plain(no_dropout, 21);
  CHECK(same_bits(model.forward(eval, saved).to_host(), plain.forward(eval, saved).to_host()));
  CHECK_FALSE(same_bits(model.forward(eval, saved).to_host(), step4));
}

// ---------------------------------------------------------------------------------------------
// The seams
// ---------------------------------------------------------------------------------------------

TEST_CASE("GPT parameters: documented names and order and count and clear errors", "[cpu]") {
  nn::GPT model(nn::GPTConfig::tiny(), 1);
  const std::vector<nn::Parameter*> params = model.parameters();
  REQUIRE(params.size() == 2 + 4 * 12 + 2);
  CHECK(params[0]->name == "wte.weight");
  CHECK(params[1]->name == "wpe.weight");
  const std::vector<std::string> block = {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
                                          "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};
  for (std::size_t l = 0; l < 4; ++l) {
    for (std::size_t k = 0; k < block.size(); ++k) CHECK(params[2 + 12 * l + k]->name == "h." + std::to_string(l) + "." + block[k]);
  }
  CHECK(params[50]->name == "ln_f.weight");
  CHECK(params[51]->name == "ln_f.bias");
  std::size_t floats = 0;
  for (const nn::Parameter* p : params) floats += p->value.size();
  CHECK(floats == nn::GPTConfig::tiny().parameter_count());
  CHECK(floats == 842496);  // 256·128 + 128·128 + 4·(12·128² + 13·128) + 2·128
  // c_attn is d × 3d: Q, K, V side by side, each split into heads of hd columns.
  CHECK(params[4]->value.rows() == 128);
  CHECK(params[4]->value.cols() == 384);

  nn::GPTConfig bad = nn::GPTConfig::tiny();
  bad.heads = 5;
  CHECK_THROWS_WITH(nn::GPT(bad, 1), Catch::Contains("not a multiple of heads"));
  bad = nn::GPTConfig::tiny();
  bad.dropout = 1.0f;
  CHECK_THROWS_AS(nn::GPT(bad, 1), std::invalid_argument);
  std::vector<nn::Saved> saved;
  CHECK_THROWS_WITH(model.forward(nn::TokenBatch{{1, 2, 3}, nn::Pass{3, 0, false}}, saved, 1, 2, nn::Tensor(3, 7)), Catch::Contains("(B·T) × 128"));
  CHECK_THROWS_WITH(model.forward(nn::TokenBatch{{1, 2, 300}, nn::Pass{3, 0, false}}, saved), Catch::Contains("token 300"));
  CHECK_THROWS_WITH(model.forward(nn::TokenBatch{std::vector<int>(129, 1), nn::Pass{129, 0, false}}, saved), Catch::Contains("context holds 128"));
  CHECK_THROWS_WITH(model.backward(nn::TokenBatch{{1, 2, 3}, nn::Pass{3, 0, false}}, nn::Tensor(3, 256), std::vector<nn::Saved>(model.units())),
                    Catch::Contains("no saved activations"));
}

TEST_CASE("GPT hooks: each parameter once with its final gradient and wte after the embeddings and unit slices equal the whole", "[cpu]") {
  const nn::GPTConfig c = config(3, 2, 8, 10, 5);
  nn::GPT model(c, 3);
  const nn::TokenBatch batch{random_tokens(10, c.vocab, 4), nn::Pass{5, 0, true}};
  const std::vector<int> targets = random_tokens(10, c.vocab, 5);
  std::vector<std::string> order;
  std::map<std::string, std::vector<float>> at_ready;
  bool done = false;
  (void)train_pass(
      model, batch, targets,
      [&](nn::Parameter& p) {
        order.push_back(p.name);
        at_ready[p.name] = p.grad.to_host();
      },
      [&] { done = true; });
  CHECK(done);
  const std::vector<nn::Parameter*> params = model.parameters();
  REQUIRE(order.size() == params.size());
  CHECK(std::set<std::string>(order.begin(), order.end()).size() == params.size());
  CHECK(order.front() == "ln_f.bias");
  CHECK(order[1] == "ln_f.weight");
  CHECK(order[2] == "h.2.mlp.c_proj.bias");
  CHECK(order[order.size() - 2] == "wpe.weight");
  CHECK(order.back() == "wte.weight");  // the head added into it first; final only after unit 0
  std::size_t changed_after = 0;
  for (nn::Parameter* p : params) {
    if (!same_bits(at_ready[p->name], p->grad.to_host())) ++changed_after;
  }
  CHECK(changed_after == 0);
  // Three "stages" of units [0, 2), [2, 4), [4, 5) run one after the other equal the whole.
  const std::vector<float> whole = all_gradients(model);
  model.zero_grad();
  std::vector<nn::Saved> s2;
  nn::Tensor h1 = model.forward(batch, s2, 0, 2);
  nn::Tensor h2 = model.forward(batch, s2, 2, 4, h1);
  nn::Tensor logits = model.forward(batch, s2, 4, 5, h2), dlogits;
  (void)nn::softmax_cross_entropy(logits, targets, &dlogits);
  nn::Tensor g2 = model.backward(batch, dlogits, s2, {}, {}, 4, 5);
  nn::Tensor g1 = model.backward(batch, g2, s2, {}, {}, 2, 4);
  CHECK(model.backward(batch, g1, s2, {}, {}, 0, 2).empty());
  CHECK(same_bits(whole, all_gradients(model)));
}

TEST_CASE("GPT takes every tensor from the installed allocator and rounds host tensors with the hook", "[cpu]") {
  const nn::GPTConfig c = config(2, 2, 16, 20, 8, 0.1f);
  const nn::TokenBatch batch{random_tokens(16, c.vocab, 40), nn::Pass{8, 1, true}};
  const std::vector<int> targets = random_tokens(16, c.vocab, 41);
  // An allocator that counts what is live: the model's parameters, then a step's activations,
  // all given back when the model goes.
  struct Counting final : nn::Allocator {
    void* allocate(std::size_t bytes, nn::Device device) override {
      ++calls;
      live += bytes;
      peak = std::max(peak, live);
      return nn::default_allocator().allocate(bytes, device);
    }
    void release(void* p, std::size_t bytes, nn::Device device) override {
      live -= bytes;
      nn::default_allocator().release(p, bytes, device);
    }
    std::size_t calls = 0, live = 0, peak = 0;
  } counting;
  nn::Allocator* previous = nn::set_allocator(&counting);
  {
    nn::GPT model(c, 1);
    const std::size_t parameters = counting.live;
    CHECK(parameters >= c.parameter_count() * sizeof(float));
    model.zero_grad();
    std::vector<nn::Saved> saved;
    nn::Tensor dlogits;
    (void)nn::softmax_cross_entropy(model.forward(batch, saved), targets, &dlogits);
    CHECK(counting.live > 2 * parameters);  // the gradients and the saved activations
    model.backward(batch, dlogits, saved);
    nn::KVCache cache;
    (void)model.decode(cache, 3);
    CHECK(counting.calls > 100);
  }
  CHECK(counting.live == 0);  // nothing kept, nothing leaked
  nn::set_allocator(previous);

  // bf16 by truncation: every host tensor the model makes holds only bf16 values.
  const nn::RoundingHook before = nn::set_rounding([](float x) {
    std::uint32_t bits;
    std::memcpy(&bits, &x, 4);
    bits &= 0xffff0000u;
    std::memcpy(&x, &bits, 4);
    return x;
  });
  const auto all_bf16 = [](const std::vector<float>& v) {
    return std::all_of(v.begin(), v.end(), [](float x) {
      std::uint32_t bits;
      std::memcpy(&bits, &x, 4);
      return (bits & 0xffffu) == 0;
    });
  };
  {
    nn::GPT model(c, 1);
    model.zero_grad();
    std::vector<nn::Saved> saved;
    const nn::Tensor logits = model.forward(batch, saved);
    CHECK(all_bf16(logits.to_host()));
    // What the blocks kept: LayerNorm's input (its mean and rstd are statistics, kept in fp32),
    // attention's x and merged output, its core's Q, K, V and P; then the MLP's activations.
    for (std::size_t u = 1; u <= c.layers; ++u) {
      REQUIRE(saved[u].parts.size() == 3);
      CHECK(all_bf16(saved[u].parts[0].tensors.at(0).to_host()));
      CHECK(all_bf16(saved[u].parts[2].tensors.at(0).to_host()));
      for (const nn::Tensor& t : saved[u].parts[1].tensors) CHECK(all_bf16(t.to_host()));
      for (const nn::Tensor& t : saved[u].parts[1].parts.at(0).tensors) CHECK(all_bf16(t.to_host()));
      for (const nn::Tensor& t : saved[u].tensors) CHECK(all_bf16(t.to_host()));
    }
    nn::Tensor dlogits;
    (void)nn::softmax_cross_entropy(logits, targets, &dlogits);
    model.backward(batch, dlogits, saved);
    for (nn::Parameter* p : model.parameters()) {
      INFO(p->name);
      CHECK(all_bf16(p->value.to_host()));
      CHECK(all_bf16(p->grad.to_host()));
    }
  }
  nn::set_rounding(before);
}

// ---------------------------------------------------------------------------------------------
// Training and generation on the lessons
// ---------------------------------------------------------------------------------------------

TEST_CASE("GPT tiny() trains on the lessons: validation loss falls from ln 256 and generation is printable and cached equals reference", "[cpu]") {
  const nn::ByteCorpus corpus = nn::lessons_corpus(GPULAB_LESSONS_DIR);
  const nn::GPTConfig c = nn::GPTConfig::tiny();
  nn::GPT model(c, 2026);
  const std::size_t B = 8, T = c.context, steps = 150;
  const std::vector<nn::Windows> validation = evaluation_batches(corpus.validation, T, 4, B);
  const double before = evaluation_loss(model, validation);
  // At initialisation the logits are near 0 (weights N(0, 0.02²)): every byte equally likely.
  CHECK(before == Approx(std::log(256.0)).margin(0.05));
  nn::AdamW adam(3e-3f, 0.9f, 0.95f, 1e-8f, 0.0f);
  const auto start = std::chrono::steady_clock::now();
  double last = 0.0;
  for (std::size_t s = 0; s < steps; ++s) {
    const nn::Windows w = nn::sample_windows(corpus.train, T, B, 1, s);
    last = train_pass(model, nn::TokenBatch{w.inputs, nn::Pass{T, s, true}}, w.targets);
    adam.step(model.parameters());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double after = evaluation_loss(model, validation), unigram = unigram_loss(corpus.train, validation);
  WARN("GPT tiny(): " << steps << " steps of " << B << " x " << T << " bytes in " << seconds << " s (" << steps * B * T / seconds
                      << " tokens/s), training loss " << last << ", validation loss " << before << " -> " << after
                      << "; byte frequencies alone: " << unigram);
  // The bound: the best model that ignores the context, byte frequencies alone, scores `unigram`
  // on these batches (3.4 nats on today's lessons). Going below it means the model uses what came
  // before. Measured while writing this test (lr 3e-3, batch 8 × 128): 3.44 after 50 steps,
  // 3.28 after 100, 3.23 after 150, 2.87 after 400 (a bigram table scores 2.76); 150 steps leave
  // 0.2 nats of margin, about 7 standard errors of a 4096-byte evaluation.
  CHECK(after < unigram);

  // Generation from "The ": printable bytes (and newlines), and the KV cache equals the reference.
  const std::vector<int> prompt = {'T', 'h', 'e', ' '};
  const std::vector<int> cached = model.generate(prompt, 60), reference = model.generate_reference(prompt, 60);
  CHECK(cached == reference);
  std::string text(prompt.begin(), prompt.end());
  std::size_t unprintable = 0;
  for (const int t : reference) {
    text += static_cast<char>(t);
    if (!(t == '\n' || (t >= 32 && t < 127))) ++unprintable;
  }
  WARN("greedy from \"The \": " << text);
  CHECK(unprintable == 0);
  const nn::Sampling warm{0.8f, 42};
  CHECK(model.generate(prompt, 40, warm) == model.generate_reference(prompt, 40, warm));
  CHECK(model.generate(prompt, 40, warm) != model.generate(prompt, 40, nn::Sampling{0.8f, 43}));
  CHECK_THROWS_AS(model.generate(prompt, c.context), std::invalid_argument);
}

TEST_CASE("GPT decode: each cached step's logits equal the reference's last row within fp32 rounding", "[cpu]") {
  const nn::GPTConfig c = config(2, 3, 24, 19, 12);
  nn::GPT model(c, 8);
  perturb(model, 9);
  const std::vector<int> tokens = random_tokens(12, c.vocab, 10);
  nn::KVCache cache;
  std::vector<nn::Saved> saved;
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const std::vector<float> step = model.decode(cache, tokens[t]).to_host();
    const std::vector<int> prefix(tokens.begin(), tokens.begin() + static_cast<long>(t) + 1);
    const std::vector<float> all = model.forward(nn::TokenBatch{prefix, nn::Pass{t + 1, 0, false}}, saved).to_host();
    // The same operations in another order (row-at-a-time GEMMs): a few u of each logit's terms,
    // whose scale is |a|·|wte| ≈ 1 here.
    double worst = 0.0;
    for (std::size_t v = 0; v < c.vocab; ++v) worst = std::max(worst, std::abs(static_cast<double>(step[v]) - all[t * c.vocab + v]));
    INFO("position " << t);
    CHECK(worst < 1e-5);
  }
  CHECK(cache.length == 12);
  CHECK_THROWS_WITH(model.decode(cache, 1), Catch::Contains("whole context"));
}

namespace {
/// A KVStore kept in vectors, one row per position: what lab 12's caches are checked against.
class VectorStore final : public nn::KVStore {
 public:
  explicit VectorStore(const nn::GPTConfig& c) : c_(c) {}
  void append(const nn::DecodeRow& row, std::size_t layer, const float* key, const float* value) override {
    auto& l = rows_[{row.sequence, layer}];
    REQUIRE(row.position == l.first.size());
    l.first.emplace_back(key, key + c_.width);
    l.second.emplace_back(value, value + c_.width);
  }
  void attend(const nn::DecodeRow& row, std::size_t layer, const float* query, float* out) override {
    const auto& l = rows_.at({row.sequence, layer});
    const std::size_t hd = c_.width / c_.heads, n = row.position + 1;
    std::vector<const float*> k(n), v(n);
    for (std::size_t h = 0; h < c_.heads; ++h) {
      for (std::size_t j = 0; j < n; ++j) {
        k[j] = l.first.at(j).data() + h * hd;
        v[j] = l.second.at(j).data() + h * hd;
      }
      nn::attend(query + h * hd, k.data(), v.data(), n, hd, 1.0f / std::sqrt(static_cast<float>(hd)), out + h * hd);
    }
  }

 private:
  nn::GPTConfig c_;
  std::map<std::pair<std::size_t, std::size_t>, std::pair<std::vector<std::vector<float>>, std::vector<std::vector<float>>>> rows_;
};
}  // namespace

TEST_CASE("GPT decode_rows: rows of any batch give the same bits and equal the reference within fp32 rounding", "[cpu]") {
  const nn::GPTConfig c = config(2, 3, 24, 19, 12);
  nn::GPT model(c, 8);
  perturb(model, 9);
  const std::vector<int> a = random_tokens(12, c.vocab, 10), b = random_tokens(7, c.vocab, 11);
  // Sequence 0 one row at a time; sequence 1 (a again) as a chunk of 5, then 7 rows mixed with b's.
  VectorStore single(c), mixed(c);
  std::vector<float> one;
  for (std::size_t t = 0; t < a.size(); ++t) {
    const std::vector<float> row = model.decode_rows({{0, t, a[t]}}, single).to_host();
    one.insert(one.end(), row.begin(), row.end());
  }
  std::vector<nn::DecodeRow> first, second;
  for (std::size_t t = 0; t < 5; ++t) first.push_back({1, t, a[t]});
  for (std::size_t t = 0; t < b.size(); ++t) {
    second.push_back({2, t, b[t]});
    second.push_back({1, 5 + t, a[5 + t]});
  }
  std::vector<float> together = model.decode_rows(first, mixed).to_host();
  const std::vector<float> rest = model.decode_rows(second, mixed).to_host();
  for (std::size_t i = 0; i < second.size(); i += 2) {  // sequence 1's rows of the mixed call
    together.insert(together.end(), rest.begin() + static_cast<long>((i + 1) * c.vocab), rest.begin() + static_cast<long>((i + 2) * c.vocab));
  }
  REQUIRE(together.size() == one.size());
  CHECK(std::memcmp(together.data(), one.data(), one.size() * sizeof(float)) == 0);
  // Against the whole-sequence forward: the same operations in another order (see decode).
  std::vector<nn::Saved> saved;
  const std::vector<float> all = model.forward(nn::TokenBatch{a, nn::Pass{a.size(), 0, false}}, saved).to_host();
  double worst = 0.0;
  for (std::size_t i = 0; i < all.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(one[i]) - all[i]));
  CHECK(worst < 1e-5);
  CHECK_THROWS_AS(model.decode_rows({{0, c.context, 1}}, single), std::invalid_argument);
  CHECK_THROWS_AS(model.decode_rows({{0, 12, static_cast<int>(c.vocab)}}, single), std::invalid_argument);
  const float q[2] = {1.0f, 2.0f};
  float out[2];
  CHECK_THROWS_AS(nn::attend(q, nullptr, nullptr, 0, 2, 1.0f, out), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// Host and device
// ---------------------------------------------------------------------------------------------

TEST_CASE("GPT host and device units agree within fp32 bounds and generation matches", "[gpu]") {
  // Unit by unit from the same input, so each bound covers one unit's operations. Every output is
  // a chain of at most a few dozen roundings of sums of at most k = 4d terms (the MLP's second
  // GEMM); both sides are within γ_k ≈ k·u of the exact value per GEMM (Higham, Accuracy and
  // Stability of Numerical Algorithms, §3.1) and a few u per row operation (the device's expf and
  // erff are within 2 ulp: CUDA C++ Programming Guide, Mathematical Functions). Taken normwise
  // with the unit's largest |output| as the scale of its terms: 64·k·u·max|y|.
  const nn::GPTConfig c = config(2, 4, 64, 256, 32, 0.1f);
  nn::GPT host(c, 31), device(c, 31, nn::Device::kGpu);
  const std::size_t T = 32, B = 4;
  const nn::TokenBatch batch{random_tokens(B * T, c.vocab, 32), nn::Pass{T, 3, true}};
  const std::vector<int> targets = random_tokens(B * T, c.vocab, 33);
  constexpr double u = 0x1p-24;
  const double k = 4.0 * static_cast<double>(c.width);
  const auto within = [&](const std::vector<float>& h, const std::vector<float>& d) {
    double scale = 0.0, worst = 0.0;
    for (const float v : h) scale = std::max(scale, static_cast<double>(std::abs(v)));
    for (std::size_t i = 0; i < h.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(h[i]) - d[i]));
    UNSCOPED_INFO("largest difference " << worst << " against the bound " << 64.0 * k * u * scale);
    return h.size() == d.size() && worst <= 64.0 * k * u * scale;
  };
  std::vector<nn::Saved> sh, sd;
  host.zero_grad();
  device.zero_grad();
  nn::Tensor x = host.forward(batch, sh, 0, 1);
  CHECK(same_bits(x.to_host(), device.forward(batch, sd, 0, 1).to_host()));  // one addition and the same mask
  std::vector<nn::Tensor> inputs;
  for (std::size_t unit = 1; unit < host.units(); ++unit) {
    inputs.push_back(x.clone());
    const nn::Tensor y = host.forward(batch, sh, unit, unit + 1, x);
    INFO("forward of unit " << unit);
    CHECK(within(y.to_host(), device.forward(batch, sd, unit, unit + 1, x.to(nn::Device::kGpu)).to_host()));
    x = y.clone();
  }
  nn::Tensor dy;
  (void)nn::softmax_cross_entropy(x, targets, &dy);
  for (std::size_t unit = host.units(); unit-- > 1;) {
    const nn::Tensor dx = host.backward(batch, dy, sh, {}, {}, unit, unit + 1);
    INFO("backward of unit " << unit);
    CHECK(within(dx.to_host(), device.backward(batch, dy.to(nn::Device::kGpu), sd, {}, {}, unit, unit + 1).to_host()));
    dy = dx.clone();
  }
  host.backward(batch, dy, sh, {}, {}, 0, 1);
  device.backward(batch, dy.to(nn::Device::kGpu), sd, {}, {}, 0, 1);
  for (std::size_t i = 0; i < host.parameters().size(); ++i) {
    INFO("gradient of " << host.parameters()[i]->name);
    CHECK(within(host.parameters()[i]->grad.to_host(), device.parameters()[i]->grad.to_host()));
  }
  // Generation on the device: the KV cache equals its own reference path.
  const std::vector<int> prompt = {'T', 'h', 'e', ' '};
  CHECK(device.generate(prompt, 20) == device.generate_reference(prompt, 20));
}
