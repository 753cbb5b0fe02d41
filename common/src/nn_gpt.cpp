/// @file nn_gpt.cpp
/// @brief Replayable dropout and the lessons corpus (see nn_gpt.hpp).
#include "gpulab/nn_gpt.hpp"

#include <algorithm>
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

}  // namespace

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
