/// @file nn_gpt.cpp
/// @brief The GPT's embeddings and LayerNorm, replayable dropout and the lessons corpus (see nn_gpt.hpp).
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

using detail::kGolden;
using detail::mix64;

void check_p(float p) {
  if (!(p >= 0.0f && p < 1.0f)) throw std::invalid_argument("dropout: p must be in [0, 1) (got " + std::to_string(p) + ")");
}

std::uint64_t key_of(const DropoutStream& d) { return detail::dropout_key(d.seed, d.step, d.tensor); }

void apply(const DropoutStream& d, std::uint64_t first, const float* in, float* out, std::size_t n) {
  check_p(d.p);
  detail::host_ops().dropout(out, in, n, key_of(d), first, d.p);
}

}  // namespace

Embedding::Embedding(std::size_t vocab, std::size_t context, std::size_t width, std::uint64_t seed, const std::string& name, Device device) {
  if (vocab == 0 || context == 0 || width == 0) throw std::invalid_argument("Embedding: vocab, context and width must be at least 1");
  token_.name = name + "token";
  token_.value = Tensor::from(detail::normal(vocab * width, 0.02f, seed), vocab, width, device);
  position_.name = name + "position";
  position_.value = Tensor::from(detail::normal(context * width, 0.02f, seed ^ 0x5bd1e995u), context, width, device);
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
  check(tokens, T);
  const std::size_t width = token_.value.cols();
  Tensor x = Tensor::uninitialized(tokens.size(), width, token_.value.device());
  detail::ops_for(x.device()).embed(x.data(), token_.value.data(), position_.value.data(), tokens.data(), tokens.size(), T, width);
  round_in_place(x);
  return x;
}

void Embedding::backward(const Tensor& dx, const std::vector<int>& tokens, std::size_t T) {
  check(tokens, T);
  const std::size_t width = token_.value.cols();
  if (dx.rows() != tokens.size() || dx.cols() != width || dx.device() != token_.value.device()) {
    throw std::invalid_argument("Embedding backward: dx " + dx.shape() + " for " + std::to_string(tokens.size()) + " tokens");
  }
  if (!token_.frozen && token_.grad.empty()) token_.grad = Tensor(token_.value.rows(), width, dx.device());
  if (!position_.frozen && position_.grad.empty()) position_.grad = Tensor(position_.value.rows(), width, dx.device());
  detail::ops_for(dx.device())
      .embed_backward(token_.frozen ? nullptr : token_.grad.data(), position_.frozen ? nullptr : position_.grad.data(), dx.data(), tokens.data(),
                      tokens.size(), T, width, token_.value.rows());
  if (!token_.frozen) round_in_place(token_.grad);
  if (!position_.frozen) round_in_place(position_.grad);
}

LayerNorm::LayerNorm(std::size_t width, float eps, const std::string& name, Device device) : width_(width), eps_(eps) {
  if (width == 0) throw std::invalid_argument("LayerNorm: width must be at least 1");
  if (!(eps > 0.0f)) throw std::invalid_argument("LayerNorm: eps must be positive");
  gamma_.name = name + "weight";
  gamma_.value = Tensor(1, width, device);
  gamma_.value.fill(1.0f);
  beta_.name = name + "bias";
  beta_.value = Tensor(1, width, device);
}

Tensor LayerNorm::forward(const Tensor& x, Saved& saved) const {
  if (x.cols() != width_ || x.device() != gamma_.value.device()) throw std::invalid_argument(describe() + ": input " + x.shape());
  const Device dev = x.device();
  Tensor y = Tensor::uninitialized(x.rows(), width_, dev), mean = Tensor::uninitialized(x.rows(), 1, dev), rstd = Tensor::uninitialized(x.rows(), 1, dev);
  detail::ops_for(dev).layernorm(y.data(), mean.data(), rstd.data(), x.data(), gamma_.value.data(), beta_.value.data(), x.rows(), width_, eps_);
  round_in_place(y);
  saved.clear();
  saved.tensors.push_back(x.clone());
  saved.tensors.push_back(std::move(mean));
  saved.tensors.push_back(std::move(rstd));
  return y;
}

Tensor LayerNorm::backward(const Tensor& dy, const Saved& saved) {
  if (saved.tensors.size() != 3) throw std::logic_error(describe() + ": backward without its forward's saved x, mean and rstd");
  const Tensor& x = saved.tensors[0];
  detail::check_like(dy, x, describe() + " backward: dy and the saved input");
  if (!gamma_.frozen && gamma_.grad.empty()) gamma_.grad = Tensor(1, width_, dy.device());
  if (!beta_.frozen && beta_.grad.empty()) beta_.grad = Tensor(1, width_, dy.device());
  Tensor dx = Tensor::uninitialized(x.rows(), width_, dy.device());
  detail::ops_for(dy.device())
      .layernorm_backward(dx.data(), gamma_.frozen ? nullptr : gamma_.grad.data(), beta_.frozen ? nullptr : beta_.grad.data(), dy.data(), x.data(),
                          saved.tensors[1].data(), saved.tensors[2].data(), gamma_.value.data(), x.rows(), width_);
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
  return detail::dropout_keep(key_of(d), index, d.p);
}

void dropout_forward(const DropoutStream& d, std::uint64_t first, const float* x, float* y, std::size_t n) { apply(d, first, x, y, n); }

void dropout_backward(const DropoutStream& d, std::uint64_t first, const float* dy, float* dx, std::size_t n) { apply(d, first, dy, dx, n); }

void dropout(Tensor& x, const DropoutStream& d, std::uint64_t first) {
  check_p(d.p);
  detail::ops_for(x.device()).dropout(x.data(), x.data(), x.size(), key_of(d), first, d.p);
  round_in_place(x);
}

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
