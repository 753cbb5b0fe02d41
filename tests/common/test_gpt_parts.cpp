/// @file test_gpt_parts.cpp
/// @brief The GPT's first parts (gpulab/nn_gpt.hpp): dropout that any slice and any recomputation
/// reproduces bit for bit, and the lessons corpus with its deterministic window sampler.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <stdexcept>
#include <vector>

#include "gpulab/nn_gpt.hpp"
#include "gpulab/random.hpp"

namespace nn = gpulab::nn;

namespace {

std::vector<float> ramp(std::size_t n) {
  std::vector<float> x(n);
  gpulab::Rng rng(11);
  for (float& v : x) v = static_cast<float>(rng.uniform(-3.0, 3.0));
  return x;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("dropout: any slice of a tensor and any recomputation make the same mask", "[cpu]") {
  const std::size_t n = 10007;
  const std::vector<float> x = ramp(n);
  const nn::DropoutStream d{2024, 17, 3, 0.25f};
  std::vector<float> whole(n), again(n), sliced(n);
  nn::dropout_forward(d, 0, x.data(), whole.data(), n);
  nn::dropout_forward(d, 0, x.data(), again.data(), n);
  CHECK(same_bits(whole, again));  // recomputation (checkpointing) reproduces it
  // Three ranks' slices, made independently.
  for (const auto& [begin, end] : {std::pair<std::size_t, std::size_t>{0, 3000}, {3000, 7777}, {7777, n}}) {
    nn::dropout_forward(d, begin, x.data() + begin, sliced.data() + begin, end - begin);
  }
  CHECK(same_bits(whole, sliced));
  // Backward drops the same elements and scales the rest by the same factor.
  const std::vector<float> dy = ramp(n);
  std::vector<float> dx(n);
  nn::dropout_backward(d, 0, dy.data(), dx.data(), n);
  std::size_t disagree = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const bool kept = nn::dropout_keeps(d, i);
    if ((whole[i] != 0.0f) != kept || (dx[i] != 0.0f) != kept) ++disagree;  // x and dy have no zeros
  }
  CHECK(disagree == 0);
}

TEST_CASE("dropout keeps 1 - p of the elements and scales them by 1 / (1 - p)", "[cpu]") {
  const std::size_t n = 1 << 20;
  const std::vector<float> x = ramp(n);
  std::vector<float> y(n);
  for (const float p : {0.1f, 0.5f}) {
    const nn::DropoutStream d{7, 1, 0, p};
    nn::dropout_forward(d, 0, x.data(), y.data(), n);
    const float scale = 1.0f / (1.0f - p);
    std::size_t kept = 0, wrong = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (y[i] != 0.0f) {
        ++kept;
        if (y[i] != x[i] * scale) ++wrong;
      }
    }
    // A binomial count: within 5 standard deviations of n(1 − p).
    const double sigma = std::sqrt(n * static_cast<double>(p) * (1.0 - p));
    INFO("p = " << p << ": kept " << kept << " of " << n);
    CHECK(std::abs(static_cast<double>(kept) - n * (1.0 - p)) <= 5.0 * sigma);
    CHECK(wrong == 0);
  }
  const nn::DropoutStream none{7, 1, 0, 0.0f};
  nn::dropout_forward(none, 0, x.data(), y.data(), n);
  CHECK(same_bits(x, y));
  CHECK_THROWS_AS(nn::dropout_keeps({7, 1, 0, 1.0f}, 0), std::invalid_argument);
  CHECK_THROWS_AS(nn::dropout_keeps({7, 1, 0, -0.1f}, 0), std::invalid_argument);
}

TEST_CASE("dropout masks of other steps and seeds and tensors are unrelated", "[cpu]") {
  const std::size_t n = 1 << 16;
  const nn::DropoutStream base{99, 5, 2, 0.5f};
  for (nn::DropoutStream other : {nn::DropoutStream{99, 6, 2, 0.5f}, nn::DropoutStream{100, 5, 2, 0.5f}, nn::DropoutStream{99, 5, 3, 0.5f}}) {
    std::size_t same = 0;
    for (std::size_t i = 0; i < n; ++i) same += nn::dropout_keeps(base, i) == nn::dropout_keeps(other, i) ? 1 : 0;
    // Independent masks at p = 1/2 agree on half the elements, binomially: within 5 sigma.
    const double sigma = std::sqrt(n * 0.25);
    INFO("seed " << other.seed << ", step " << other.step << ", tensor " << other.tensor << ": " << same << " of " << n << " decisions equal");
    CHECK(std::abs(static_cast<double>(same) - n * 0.5) <= 5.0 * sigma);
  }
}

TEST_CASE("the lessons corpus: every lesson's bytes in file order and split 90 / 10", "[cpu]") {
  const nn::ByteCorpus c = nn::lessons_corpus(GPULAB_LESSONS_DIR);
  REQUIRE(!c.files.empty());
  CHECK(std::is_sorted(c.files.begin(), c.files.end()));
  std::size_t bytes = 0;
  for (const std::string& f : c.files) bytes += std::filesystem::file_size(std::filesystem::path(GPULAB_LESSONS_DIR) / f) + 1;
  CHECK(c.train.size() + c.validation.size() == bytes);
  CHECK(c.train.size() == bytes / 10 * 9);
  const nn::ByteCorpus again = nn::lessons_corpus(GPULAB_LESSONS_DIR);
  CHECK(again.train == c.train);
  CHECK(again.validation == c.validation);
  CHECK_THROWS_AS(nn::lessons_corpus(GPULAB_LESSONS_DIR "/no-such-folder"), std::runtime_error);
}

TEST_CASE("sample_windows: each target is the next byte and a step's batch is the same on every call", "[cpu]") {
  std::vector<std::uint8_t> text(1000);
  for (std::size_t i = 0; i < text.size(); ++i) text[i] = static_cast<std::uint8_t>((i * 37 + i / 7) % 256);
  const std::size_t context = 16, batch = 64;
  const nn::Windows w = nn::sample_windows(text, context, batch, 5, 0);
  REQUIRE(w.inputs.size() == batch * context);
  REQUIRE(w.targets.size() == batch * context);
  std::size_t wrong = 0;
  for (std::size_t b = 0; b < batch; ++b) {
    CHECK(w.starts[b] + context < text.size());  // the last target exists
    for (std::size_t t = 0; t < context; ++t) {
      if (w.inputs[b * context + t] != text[w.starts[b] + t] || w.targets[b * context + t] != text[w.starts[b] + t + 1]) ++wrong;
    }
  }
  CHECK(wrong == 0);
  const nn::Windows same = nn::sample_windows(text, context, batch, 5, 0), next = nn::sample_windows(text, context, batch, 5, 1);
  CHECK(same.starts == w.starts);
  CHECK(next.starts != w.starts);
  // The starts cover the range: 64 draws from 984 places land on many distinct ones.
  CHECK(std::set<std::size_t>(w.starts.begin(), w.starts.end()).size() > batch / 2);
  CHECK_THROWS_AS(nn::sample_windows(std::vector<std::uint8_t>(16), 16, 1, 5, 0), std::invalid_argument);
  CHECK_THROWS_AS(nn::sample_windows(text, 0, 1, 5, 0), std::invalid_argument);
}

namespace {

/// LayerNorm in fp64, written here (not the library's code): y, and the rows' mean and rstd.
struct Ln64 {
  std::vector<double> y, mean, rstd;
};
Ln64 layernorm64(const std::vector<double>& x, std::size_t rows, std::size_t width, const std::vector<double>& gamma,
                 const std::vector<double>& beta, double eps) {
  Ln64 out{std::vector<double>(rows * width), std::vector<double>(rows), std::vector<double>(rows)};
  for (std::size_t r = 0; r < rows; ++r) {
    double mu = 0.0, var = 0.0;
    for (std::size_t c = 0; c < width; ++c) mu += x[r * width + c];
    mu /= static_cast<double>(width);
    for (std::size_t c = 0; c < width; ++c) var += (x[r * width + c] - mu) * (x[r * width + c] - mu);
    var /= static_cast<double>(width);
    const double rs = 1.0 / std::sqrt(var + eps);
    out.mean[r] = mu;
    out.rstd[r] = rs;
    for (std::size_t c = 0; c < width; ++c) out.y[r * width + c] = (x[r * width + c] - mu) * rs * gamma[c] + beta[c];
  }
  return out;
}

}  // namespace

TEST_CASE("LayerNorm on host tensors: forward within fp32's bound of fp64 and backward against fp64 central differences", "[cpu]") {
  constexpr double u = 0x1p-24;
  const float eps = 1e-5f;
  struct Shape {
    std::size_t rows, width;
    double offset;  // added to every x: Welford's case (E[x²] − E[x]² would cancel)
  };
  for (const Shape s : {Shape{1, 1, 0.0}, Shape{7, 5, 0.0}, Shape{3, 33, 0.0}, Shape{4, 17, 1e4}}) {
    gpulab::Rng rng(1000 + s.rows * 100 + s.width);
    std::vector<float> xf(s.rows * s.width), dyf(s.rows * s.width), gf(s.width), bf(s.width);
    for (float& v : xf) v = static_cast<float>(s.offset + rng.uniform(-1.0, 1.0));
    for (float& v : dyf) v = static_cast<float>(rng.uniform(-1.0, 1.0));
    for (float& v : gf) v = static_cast<float>(rng.uniform(0.5, 1.5));
    for (float& v : bf) v = static_cast<float>(rng.uniform(-0.5, 0.5));
    nn::LayerNorm ln(s.width, eps);
    ln.gamma().value.assign(gf);
    ln.beta().value.assign(bf);
    nn::Saved saved;
    const std::vector<float> y = ln.forward(nn::Tensor::from(xf, s.rows, s.width), saved).to_host();
    const std::vector<float> dx = ln.backward(nn::Tensor::from(dyf, s.rows, s.width), saved).to_host();
    const std::vector<float> dgamma = ln.gamma().grad.to_host(), dbeta = ln.beta().grad.to_host();

    const std::vector<double> x(xf.begin(), xf.end()), dy(dyf.begin(), dyf.end()), g(gf.begin(), gf.end()), b(bf.begin(), bf.end());
    const Ln64 want = layernorm64(x, s.rows, s.width, g, b, eps);
    // Forward: x̂ in fp32 carries about (width + 4)·u of relative error from the mean and rstd
    // (sums of width terms, the offset included), each further step a rounding: 8 × that.
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
      const std::size_t r = i / s.width, c = i % s.width;
      const double xhat = (x[i] - want.mean[r]) * want.rstd[r];
      const double bound = 8.0 * (s.width + 4) * u * (std::abs(xhat) + (std::abs(x[i]) + std::abs(want.mean[r])) * want.rstd[r]) * g[c] + 4.0 * u * std::abs(b[c]);
      if (std::abs(y[i] - want.y[i]) > bound) ++wrong;
    }
    INFO(s.rows << " x " << s.width << " at offset " << s.offset);
    CHECK(wrong == 0);

    // Backward: L = Σ dy·y; its gradients by central differences of the fp64 LayerNorm.
    const auto loss = [&](const std::vector<double>& xx, const std::vector<double>& gg, const std::vector<double>& bb) {
      const Ln64 o = layernorm64(xx, s.rows, s.width, gg, bb, eps);
      double l = 0.0;
      for (std::size_t i = 0; i < o.y.size(); ++i) l += dy[i] * o.y[i];
      return l;
    };
    // The step: small against the rows' spread (1/rstd), not against |x|, which the offset makes
    // 10⁴; in fp64 its truncation (h²) and cancellation (ε·|L|/h) errors are below 10⁻⁹.
    const auto central = [&](std::vector<double>& v, std::size_t i, const std::function<double()>& f) {
      const double h = 1e-5, keep = v[i];
      v[i] = keep + h;
      const double up = f();
      v[i] = keep - h;
      const double down = f();
      v[i] = keep;
      return (up - down) / (2.0 * h);
    };
    // fp32's error in x̂ = (x − mean)·rstd, absolute: the mean and rstd are sums of width terms of
    // magnitude |x| (10⁴ at the offset), so 8·(width + 4)·u·(|x| + |mean|)·rstd.
    std::vector<double> e_xhat(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::size_t r = i / s.width;
      e_xhat[i] = 8.0 * (s.width + 4) * u * (std::abs(x[i]) + std::abs(want.mean[r])) * want.rstd[r];
    }
    std::vector<double> xx = x, gg = g, bb = b;
    std::size_t wrong_dx = 0, wrong_dg = 0, wrong_db = 0;
    for (std::size_t r = 0; r < s.rows; ++r) {
      double mean_abs_g = 0.0, mean_abs_gx = 0.0, mean_gx = 0.0, mean_abs_g_e = 0.0;
      for (std::size_t c = 0; c < s.width; ++c) {
        const std::size_t i = r * s.width + c;
        const double xhat = (x[i] - want.mean[r]) * want.rstd[r];
        mean_abs_g += std::abs(dy[i] * g[c]) / s.width;
        mean_abs_gx += std::abs(dy[i] * g[c] * xhat) / s.width;
        mean_gx += dy[i] * g[c] * xhat / s.width;
        mean_abs_g_e += std::abs(dy[i] * g[c]) * e_xhat[i] / s.width;
      }
      for (std::size_t c = 0; c < s.width; ++c) {
        const std::size_t i = r * s.width + c;
        const double xhat = (x[i] - want.mean[r]) * want.rstd[r];
        const double fd = central(xx, i, [&] { return loss(xx, gg, bb); });
        // dx = rstd·(g − mean(g) − x̂·mean(g·x̂)): the roundings of the two means (width terms
        // each), and x̂'s error carried through x̂·mean(g·x̂); then 10⁻⁹ for the difference quotient.
        const double dx_want = want.rstd[r] * (std::abs(dy[i] * g[c]) + mean_abs_g + std::abs(xhat) * mean_abs_gx);
        const double bound = 8.0 * (s.width + 4) * u * want.rstd[r] * (std::abs(dy[i] * g[c]) + mean_abs_g + (1.0 + std::abs(xhat)) * mean_abs_gx) +
                             want.rstd[r] * (e_xhat[i] * std::abs(mean_gx) + std::abs(xhat) * mean_abs_g_e) +
                             8.0 * (s.width + 4) * u * (1.0 + std::abs(want.mean[r]) * want.rstd[r]) * dx_want + 1e-9;
        if (std::abs(dx[i] - fd) > bound) ++wrong_dx;
      }
    }
    for (std::size_t c = 0; c < s.width; ++c) {
      double sum_abs = 0.0, sum_dy = 0.0, sum_e = 0.0;
      for (std::size_t r = 0; r < s.rows; ++r) {
        const std::size_t i = r * s.width + c;
        sum_abs += std::abs(dy[i] * (x[i] - want.mean[r]) * want.rstd[r]);
        sum_dy += std::abs(dy[i]);
        sum_e += std::abs(dy[i]) * e_xhat[i];
      }
      const double fd_g = central(gg, c, [&] { return loss(xx, gg, bb); }), fd_b = central(bb, c, [&] { return loss(xx, gg, bb); });
      if (std::abs(dgamma[c] - fd_g) > 8.0 * (s.rows + 4) * u * sum_abs + sum_e + 1e-9) ++wrong_dg;
      if (std::abs(dbeta[c] - fd_b) > 8.0 * (s.rows + 1) * u * sum_dy + 1e-9) ++wrong_db;
    }
    CHECK(wrong_dx == 0);
    CHECK(wrong_dg == 0);
    CHECK(wrong_db == 0);
  }
  CHECK_THROWS_AS(nn::LayerNorm(0), std::invalid_argument);
}

TEST_CASE("Embedding: each row is its token's row plus its position's and backward adds into the rows used", "[cpu]") {
  const std::size_t vocab = 11, context = 6, width = 5, T = 4;
  nn::Embedding e(vocab, context, width, 3, "wte.");
  CHECK(e.token().name == "wte.token");
  CHECK(e.position().name == "wte.position");
  const std::vector<int> tokens = {3, 7, 3, 10, 0, 0, 5, 3};  // two sequences of 4; token 3 three times, 0 twice
  const std::vector<float> x = e.forward(tokens, T).to_host();
  const std::vector<float> wte = e.token().value.to_host(), wpe = e.position().value.to_host();
  std::size_t wrong = 0;
  for (std::size_t r = 0; r < tokens.size(); ++r) {
    for (std::size_t c = 0; c < width; ++c) {
      // One fp32 addition of the two table entries: exact to compare.
      if (x[r * width + c] != wte[static_cast<std::size_t>(tokens[r]) * width + c] + wpe[(r % T) * width + c]) ++wrong;
    }
  }
  CHECK(wrong == 0);
  // Backward with dx = 1 + r + c/8 (exact sums in fp32): wte's row v gets the sum over the rows
  // using v, wpe's row t the sum over the rows at position t; rows never used stay 0.
  std::vector<float> dxv(tokens.size() * width);
  for (std::size_t r = 0; r < tokens.size(); ++r) {
    for (std::size_t c = 0; c < width; ++c) dxv[r * width + c] = 1.0f + static_cast<float>(r) + static_cast<float>(c) / 8.0f;
  }
  e.backward(nn::Tensor::from(dxv, tokens.size(), width), tokens, T);
  const std::vector<float> gt = e.token().grad.to_host(), gp = e.position().grad.to_host();
  std::vector<double> want_t(vocab * width, 0.0), want_p(context * width, 0.0);
  for (std::size_t r = 0; r < tokens.size(); ++r) {
    for (std::size_t c = 0; c < width; ++c) {
      want_t[static_cast<std::size_t>(tokens[r]) * width + c] += dxv[r * width + c];
      want_p[(r % T) * width + c] += dxv[r * width + c];
    }
  }
  std::size_t wrong_t = 0, wrong_p = 0;
  for (std::size_t i = 0; i < want_t.size(); ++i) wrong_t += gt[i] != static_cast<float>(want_t[i]) ? 1 : 0;
  for (std::size_t i = 0; i < want_p.size(); ++i) wrong_p += gp[i] != static_cast<float>(want_p[i]) ? 1 : 0;
  CHECK(wrong_t == 0);
  CHECK(wrong_p == 0);
  CHECK_THROWS_AS(e.forward({3, 11}, 2), std::invalid_argument);   // outside the vocabulary
  CHECK_THROWS_AS(e.forward({3, -1}, 2), std::invalid_argument);
  CHECK_THROWS_AS(e.forward(std::vector<int>(7, 1), 7), std::invalid_argument);  // longer than the context
  CHECK_THROWS_AS(e.forward({1, 2, 3}, 2), std::invalid_argument);  // not whole sequences
  // The tables start N(0, 0.02²): over 55 + 30 values, the sample deviation is near 0.02.
  double ss = 0.0;
  for (float v : wte) ss += static_cast<double>(v) * v;
  for (float v : wpe) ss += static_cast<double>(v) * v;
  const double sd = std::sqrt(ss / static_cast<double>(wte.size() + wpe.size()));
  INFO("sample deviation " << sd);
  CHECK((sd > 0.014 && sd < 0.026));
}
