/// @file nn_gpt.hpp
/// @brief The first parts of gpulab::nn's GPT (the model labs 10–12 will parallelise and serve):
/// token and position embeddings and LayerNorm (host tensors), dropout that any rank can replay,
/// and the byte-level corpus the course ships. Attention, the block, the model, generation and
/// the device path are still to come.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gpulab/nn.hpp"

namespace gpulab::nn {

// ---------------------------------------------------------------------------------------------
// Embeddings
// ---------------------------------------------------------------------------------------------

/// The GPT's input: for sequence b and position t, x[b·T + t] = wte[token] + wpe[t]. The token
/// table (vocab × width, named @p name + "token", the one the LM head will share) and the position
/// table (context × width, @p name + "position") start N(0, 0.02²), as GPT-2's, from @p seed.
/// Host tensors only for now.
class Embedding {
 public:
  /// Tables for @p vocab tokens and @p context positions of @p width features; throws
  /// std::invalid_argument when any is 0.
  Embedding(std::size_t vocab, std::size_t context, std::size_t width, std::uint64_t seed, const std::string& name = "");
  /// @p tokens: batch · T ids in [0, vocab), sequence by sequence, T ≤ context. Returns the
  /// (batch · T) × width rows. Throws std::invalid_argument for an id out of range, T = 0,
  /// T > context, or a count that is not a multiple of T.
  Tensor forward(const std::vector<int>& tokens, std::size_t T) const;
  /// Adds row r of @p dx into the token table's row tokens[r] and the position table's row r mod T
  /// (a token used twice gets both rows).
  void backward(const Tensor& dx, const std::vector<int>& tokens, std::size_t T);
  /// The token table, then the position table.
  std::vector<Parameter*> parameters() { return {&token_, &position_}; }
  Parameter& token() { return token_; }        ///< wte, vocab × width.
  Parameter& position() { return position_; }  ///< wpe, context × width.

 private:
  void check(const std::vector<int>& tokens, std::size_t T) const;
  Parameter token_, position_;
};

// ---------------------------------------------------------------------------------------------
// LayerNorm
// ---------------------------------------------------------------------------------------------

/// y = (x − mean)·rstd·γ + β over each row, rstd = 1/√(var + eps), var the biased variance (÷ n),
/// mean and variance by Welford in fp32 (no E[x²] − E[x]²). γ starts at 1, β at 0, named @p name +
/// "weight" and "bias". Saves x, and each row's mean and rstd, for backward:
/// dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) with g = dy·γ; dγ += Σ_rows dy·x̂, dβ += Σ_rows dy.
/// Host tensors only for now (the GPT's device path is still to come): a device tensor throws.
class LayerNorm final : public Layer {
 public:
  /// Over rows of @p width features.
  explicit LayerNorm(std::size_t width, float eps = 1e-5f, const std::string& name = "");
  Tensor forward(const Tensor& x, Saved& saved) const override;
  Tensor backward(const Tensor& dy, const Saved& saved) override;
  std::vector<Parameter*> parameters() override { return {&gamma_, &beta_}; }
  std::string describe() const override;
  double forward_flops(std::size_t batch) const override;
  std::size_t saved_floats(std::size_t batch) const override;
  Parameter& gamma() { return gamma_; }  ///< γ, 1 × width.
  Parameter& beta() { return beta_; }    ///< β, 1 × width.

 private:
  std::size_t width_;
  float eps_;
  Parameter gamma_, beta_;
};

// ---------------------------------------------------------------------------------------------
// Dropout that can be replayed
// ---------------------------------------------------------------------------------------------

/// Where a dropout mask comes from. Element i of tensor @c tensor at step @c step of the run seeded
/// @c seed is kept with probability 1 − p, decided by a pure function of (seed, step, tensor, i):
/// the i-th output of SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014) seeded with a key mixed from (seed, step, tensor). No state advances,
/// so a rank holding elements [first, first + n) of a tensor makes exactly its slice of the mask,
/// and a recomputation (activation checkpointing) makes the same mask again.
struct DropoutStream {
  std::uint64_t seed = 0;    ///< the run's seed
  std::uint64_t step = 0;    ///< the training step
  std::uint32_t tensor = 0;  ///< which dropout site (a stable id per layer and use)
  float p = 0.0f;            ///< the probability of dropping, in [0, 1)
};

/// Whether element @p index of @p d's tensor is kept. Throws std::invalid_argument unless 0 ≤ p < 1.
bool dropout_keeps(const DropoutStream& d, std::uint64_t index);

/// y[k] = x[k] / (1 − p) where element first + k is kept, else 0, for k < n (inverted dropout:
/// the expectation of y is x, so inference needs no rescaling). In place when x == y.
void dropout_forward(const DropoutStream& d, std::uint64_t first, const float* x, float* y, std::size_t n);

/// dx[k] = dy[k] / (1 − p) where element first + k is kept, else 0: the mask is made again, never
/// stored.
void dropout_backward(const DropoutStream& d, std::uint64_t first, const float* dy, float* dx, std::size_t n);

// ---------------------------------------------------------------------------------------------
// The corpus: the course's own lessons, as bytes
// ---------------------------------------------------------------------------------------------

/// Text as bytes, vocabulary 256, split once: the first 90 % of the bytes train, the last 10 %
/// validate (a fixed split, the same on every machine for the same lessons).
struct ByteCorpus {
  std::vector<std::uint8_t> train;       ///< the first 90 %
  std::vector<std::uint8_t> validation;  ///< the last 10 %
  std::vector<std::string> files;        ///< the files read, in order (names only)
};

/// lessons/*.md of @p lessons_dir in file-name order, each followed by one newline. Throws
/// std::runtime_error when the folder holds no lesson.
ByteCorpus lessons_corpus(const std::string& lessons_dir);

/// A batch of (context, next byte) windows: row b is text[starts[b] ..] for inputs and
/// text[starts[b] + 1 ..] for targets, context bytes each.
struct Windows {
  std::size_t batch = 0;             ///< windows
  std::size_t context = 0;           ///< bytes per window
  std::vector<int> inputs;           ///< batch × context byte values, row by row
  std::vector<int> targets;          ///< the next byte of each input position
  std::vector<std::size_t> starts;   ///< where each window starts in the text
};

/// @p batch windows of @p context bytes from @p text, each start uniform in
/// [0, size − context − 1], a pure function of (@p seed, @p step): every rank that asks for the
/// same step gets the same batch. Throws std::invalid_argument when the text is shorter than
/// context + 1 bytes or context or batch is 0.
Windows sample_windows(const std::vector<std::uint8_t>& text, std::size_t context, std::size_t batch, std::uint64_t seed, std::uint64_t step);

}  // namespace gpulab::nn
