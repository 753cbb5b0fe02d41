/// @file test_gpt_parts.cpp
/// @brief The GPT's first parts (gpulab/nn_gpt.hpp): dropout that any slice and any recomputation
/// reproduces bit for bit, and the lessons corpus with its deterministic window sampler.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
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
