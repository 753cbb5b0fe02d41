/// @file nn_gpt.cpp
/// @brief Replayable dropout and the lessons corpus (see nn_gpt.hpp).
#include "gpulab/nn_gpt.hpp"

#include "nn_internal.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace gpulab::nn {
namespace {

constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ull;  // SplitMix64's increment, 2⁶⁴/φ

/// SplitMix64's output function (Steele, Lea and Flood 2014).
std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// The stream's key: (seed, step, tensor) mixed one after the other, each through the finaliser,
/// so that neighbouring steps or tensors give unrelated keys.
std::uint64_t key_of(const DropoutStream& d) {
  std::uint64_t k = mix64(d.seed + kGolden);
  k = mix64(k ^ (d.step + kGolden));
  return mix64(k ^ (static_cast<std::uint64_t>(d.tensor) + kGolden));
}

void check_p(float p) {
  if (!(p >= 0.0f && p < 1.0f)) throw std::invalid_argument("dropout: p must be in [0, 1) (got " + std::to_string(p) + ")");
}

/// Element @p index kept: the index-th SplitMix64 output of @p key, its top 24 bits as u in [0, 1).
bool keeps(std::uint64_t key, std::uint64_t index, float p) {
  const std::uint64_t bits = mix64(key + (index + 1) * kGolden);
  const float u = static_cast<float>(bits >> 40) * 0x1p-24f;
  return u >= p;
}

void apply(const DropoutStream& d, std::uint64_t first, const float* in, float* out, std::size_t n) {
  check_p(d.p);
  const std::uint64_t key = key_of(d);
  const float scale = 1.0f / (1.0f - d.p);
  for (std::size_t k = 0; k < n; ++k) out[k] = keeps(key, first + k, d.p) ? in[k] * scale : 0.0f;
}

void host_only(const Tensor& t, const std::string& who) {
  if (t.device() != Device::kHost) throw std::invalid_argument(who + ": host tensors only for now (the device path is still to come), got " + t.shape());
}

}  // namespace

Embedding::Embedding(std::size_t vocab, std::size_t context, std::size_t width, std::uint64_t seed, const std::string& name) {
  if (vocab == 0 || context == 0 || width == 0) throw std::invalid_argument("Embedding: vocab, context and width must be at least 1");
  token_.name = name + "token";
  token_.value = Tensor::from(detail::normal(vocab * width, 0.02f, seed), vocab, width);
  position_.name = name + "position";
  position_.value = Tensor::from(detail::normal(context * width, 0.02f, seed ^ 0x5bd1e995u), context, width);
  round_in_place(token_.value);
  round_in_place(position_.value);
}

void Embedding::check(const std::vector<int>& tokens, std::size_t T) const {
  if (T == 0 || T > position_.value.rows() || tokens.size() % T != 0) {
    throw std::invalid_argument("Embedding: " + std::to_string(tokens.size()) + " tokens in sequences of " + std::to_string(T) +
                                " (the context holds " + std::to_string(position_.value.rows()) + ")");
  }
  for (const int id : tokens) {
    if (id < 0 || static_cast<std::size_t>(id) >= token_.value.rows()) {
      throw std::invalid_argument("Embedding: token " + std::to_string(id) + " outside the vocabulary of " + std::to_string(token_.value.rows()));
    }
  }
}

Tensor Embedding::forward(const std::vector<int>& tokens, std::size_t T) const {
  host_only(token_.value, "Embedding");
  check(tokens, T);
  const std::size_t width = token_.value.cols();
  Tensor x = Tensor::uninitialized(tokens.size(), width);
  for (std::size_t r = 0; r < tokens.size(); ++r) {
    const float* te = token_.value.data() + static_cast<std::size_t>(tokens[r]) * width;
    const float* pe = position_.value.data() + (r % T) * width;
    for (std::size_t c = 0; c < width; ++c) x.data()[r * width + c] = te[c] + pe[c];
  }
  round_in_place(x);
  return x;
}

void Embedding::backward(const Tensor& dx, const std::vector<int>& tokens, std::size_t T) {
  host_only(dx, "Embedding backward");
  check(tokens, T);
  const std::size_t width = token_.value.cols();
  if (dx.rows() != tokens.size() || dx.cols() != width) throw std::invalid_argument("Embedding backward: dx " + dx.shape() + " for " + std::to_string(tokens.size()) + " tokens");
  if (!token_.frozen && token_.grad.empty()) token_.grad = Tensor(token_.value.rows(), width);
  if (!position_.frozen && position_.grad.empty()) position_.grad = Tensor(position_.value.rows(), width);
  for (std::size_t r = 0; r < tokens.size(); ++r) {
    const float* d = dx.data() + r * width;
    if (!token_.frozen) {
      float* g = token_.grad.data() + static_cast<std::size_t>(tokens[r]) * width;
      for (std::size_t c = 0; c < width; ++c) g[c] += d[c];
    }
    if (!position_.frozen) {
      float* g = position_.grad.data() + (r % T) * width;
      for (std::size_t c = 0; c < width; ++c) g[c] += d[c];
    }
  }
  if (!token_.frozen) round_in_place(token_.grad);
  if (!position_.frozen) round_in_place(position_.grad);
}

LayerNorm::LayerNorm(std::size_t width, float eps, const std::string& name) : width_(width), eps_(eps) {
  if (width == 0) throw std::invalid_argument("LayerNorm: width must be at least 1");
  if (!(eps > 0.0f)) throw std::invalid_argument("LayerNorm: eps must be positive");
  gamma_.name = name + "weight";
  gamma_.value = Tensor(1, width);
  gamma_.value.fill(1.0f);
  beta_.name = name + "bias";
  beta_.value = Tensor(1, width);
}

Tensor LayerNorm::forward(const Tensor& x, Saved& saved) const {
  host_only(x, describe());
  if (x.cols() != width_) throw std::invalid_argument(describe() + ": input " + x.shape());
  Tensor y = Tensor::uninitialized(x.rows(), width_), mean = Tensor::uninitialized(x.rows(), 1), rstd = Tensor::uninitialized(x.rows(), 1);
  const float* g = gamma_.value.data();
  const float* b = beta_.value.data();
  for (std::size_t r = 0; r < x.rows(); ++r) {
    const float* xr = x.data() + r * width_;
    // Welford (1962): only deviations are squared.
    float n = 0.0f, mu = 0.0f, m2 = 0.0f;
    for (std::size_t c = 0; c < width_; ++c) {
      n += 1.0f;
      const float d = xr[c] - mu;
      mu += d / n;
      m2 += d * (xr[c] - mu);
    }
    const float rs = 1.0f / std::sqrt(m2 / static_cast<float>(width_) + eps_);
    mean.data()[r] = mu;
    rstd.data()[r] = rs;
    float* yr = y.data() + r * width_;
    for (std::size_t c = 0; c < width_; ++c) yr[c] = (xr[c] - mu) * rs * g[c] + b[c];
  }
  round_in_place(y);
  saved.tensors.clear();
  saved.tensors.push_back(x.clone());
  saved.tensors.push_back(std::move(mean));
  saved.tensors.push_back(std::move(rstd));
  return y;
}

Tensor LayerNorm::backward(const Tensor& dy, const Saved& saved) {
  if (saved.tensors.size() != 3) throw std::logic_error(describe() + ": backward without its forward's saved x, mean and rstd");
  const Tensor& x = saved.tensors[0];
  host_only(dy, describe());
  if (dy.rows() != x.rows() || dy.cols() != width_) throw std::invalid_argument(describe() + ": backward of dy " + dy.shape() + " for the input " + x.shape());
  if (!gamma_.frozen && gamma_.grad.empty()) gamma_.grad = Tensor(1, width_);
  if (!beta_.frozen && beta_.grad.empty()) beta_.grad = Tensor(1, width_);
  Tensor dx = Tensor::uninitialized(x.rows(), width_);
  const float* g = gamma_.value.data();
  const float inv_n = 1.0f / static_cast<float>(width_);
  for (std::size_t r = 0; r < x.rows(); ++r) {
    const float* xr = x.data() + r * width_;
    const float* dyr = dy.data() + r * width_;
    const float mu = saved.tensors[1].data()[r], rs = saved.tensors[2].data()[r];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (std::size_t c = 0; c < width_; ++c) {
      const float xhat = (xr[c] - mu) * rs, gc = dyr[c] * g[c];
      sum_g += gc;
      sum_gx += gc * xhat;
      if (!gamma_.frozen) gamma_.grad.data()[c] += dyr[c] * xhat;
      if (!beta_.frozen) beta_.grad.data()[c] += dyr[c];
    }
    const float mean_g = sum_g * inv_n, mean_gx = sum_gx * inv_n;
    float* dxr = dx.data() + r * width_;
    for (std::size_t c = 0; c < width_; ++c) {
      const float xhat = (xr[c] - mu) * rs;
      dxr[c] = rs * (dyr[c] * g[c] - mean_g - xhat * mean_gx);
    }
  }
  if (!gamma_.frozen) round_in_place(gamma_.grad);
  if (!beta_.frozen) round_in_place(beta_.grad);
  round_in_place(dx);
  return dx;
}

std::string LayerNorm::describe() const { return "LayerNorm(" + std::to_string(width_) + ")"; }
// Welford's 3 subtractions, a division and a multiply-add per element, then 4 per element for y.
double LayerNorm::forward_flops(std::size_t batch) const { return 10.0 * static_cast<double>(batch * width_); }
std::size_t LayerNorm::saved_floats(std::size_t batch) const { return batch * (width_ + 2); }

bool dropout_keeps(const DropoutStream& d, std::uint64_t index) {
  check_p(d.p);
  return keeps(key_of(d), index, d.p);
}

void dropout_forward(const DropoutStream& d, std::uint64_t first, const float* x, float* y, std::size_t n) { apply(d, first, x, y, n); }

void dropout_backward(const DropoutStream& d, std::uint64_t first, const float* dy, float* dx, std::size_t n) { apply(d, first, dy, dx, n); }

ByteCorpus lessons_corpus(const std::string& lessons_dir) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(lessons_dir, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".md") files.push_back(e.path());
  }
  if (files.empty()) throw std::runtime_error("lessons_corpus: no lessons (*.md) in " + lessons_dir);
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) { return a.filename().string() < b.filename().string(); });
  std::vector<std::uint8_t> all;
  ByteCorpus corpus;
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    all.insert(all.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    all.push_back('\n');
    corpus.files.push_back(f.filename().string());
  }
  const std::size_t cut = all.size() / 10 * 9;
  corpus.train.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(cut));
  corpus.validation.assign(all.begin() + static_cast<std::ptrdiff_t>(cut), all.end());
  return corpus;
}

Windows sample_windows(const std::vector<std::uint8_t>& text, std::size_t context, std::size_t batch, std::uint64_t seed, std::uint64_t step) {
  if (context == 0 || batch == 0) throw std::invalid_argument("sample_windows: context and batch must be at least 1");
  if (text.size() < context + 1) {
    throw std::invalid_argument("sample_windows: " + std::to_string(text.size()) + " bytes of text cannot hold a window of " +
                                std::to_string(context) + " and its next byte");
  }
  Windows w;
  w.batch = batch;
  w.context = context;
  // Start b of this step: the b-th output of a SplitMix64 stream keyed by (seed, step), reduced to
  // [0, range) by a 128-bit multiply (no modulo bias worth naming at these sizes).
  const std::uint64_t range = text.size() - context;  // starts 0 .. size − context − 1
  const std::uint64_t key = mix64(mix64(seed + kGolden) ^ (step + kGolden));
  for (std::size_t b = 0; b < batch; ++b) {
    const std::uint64_t bits = mix64(key + (b + 1) * kGolden);
    const auto start = static_cast<std::size_t>((static_cast<unsigned __int128>(bits) * range) >> 64);
    w.starts.push_back(start);
    for (std::size_t t = 0; t < context; ++t) {
      w.inputs.push_back(text[start + t]);
      w.targets.push_back(text[start + t + 1]);
    }
  }
  return w;
}

}  // namespace gpulab::nn
