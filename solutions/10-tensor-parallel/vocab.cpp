/// @file vocab.cpp
/// @brief Lab 10 — the vocabulary-parallel embedding and the vocabulary-parallel cross-entropy of
/// the tied LM head (Megatron-LM's VocabParallelEmbedding and vocab_parallel_cross_entropy).
/// Read lessons/10-tensor-parallel.md, sections "TODO(10.4)".
///
/// Napkin math: GPT-2's 50 257 × 768 table is 154 MB in fp32; its logits for a batch of
/// 8 × 1024 tokens are 8192 × 50 257 × 4 B = 1.6 GB. Gathering them would cost more traffic than
/// all the block's all-reduces together; the loss needs only 3 numbers per row from each rank.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "tp.hpp"

namespace lab10 {

using gpulab::dist::CollectiveRequest;

VocabParallelEmbedding::VocabParallelEmbedding(Communicator& tp, const nn::Embedding& full, bool sequence_parallel)
    : tp(tp), sequence_parallel(sequence_parallel) {
  const std::size_t vocab = full.token().value.rows(), width = full.token().value.cols();
  first = slice_begin(vocab, tp.size(), tp.rank(), "the vocabulary");
  const std::size_t count = vocab / static_cast<std::size_t>(tp.size());
  const std::vector<float> all = full.token().value.to_host();
  wte.name = full.token().name;
  wte.value = nn::Tensor::from(std::vector<float>(all.begin() + static_cast<long>(first * width), all.begin() + static_cast<long>((first + count) * width)),
                               count, width, full.token().value.device());
  wpe.name = full.position().name;
  wpe.value = full.position().value.clone();
}

// BEGIN SOLUTION(10.4) The vocabulary-parallel embedding, forward and backward, and the loss that never gathers the logits
nn::Tensor VocabParallelEmbedding::forward(const std::vector<int>& tokens, std::size_t T) {
  const std::size_t d = wte.value.cols(), count = wte.value.rows(), vocab = count * static_cast<std::size_t>(tp.size());
  if (T == 0 || T > wpe.value.rows() || tokens.size() % T != 0) {
    throw std::invalid_argument("VocabParallelEmbedding: " + std::to_string(tokens.size()) + " tokens in sequences of " + std::to_string(T));
  }
  const std::vector<float> table = wte.value.to_host();
  std::vector<float> rows(tokens.size() * d, 0.0f);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const int id = tokens[i];
    if (id < 0 || static_cast<std::size_t>(id) >= vocab) throw std::invalid_argument("VocabParallelEmbedding: token " + std::to_string(id) + " outside [0, " + std::to_string(vocab) + ")");
    const std::size_t local = static_cast<std::size_t>(id) - first;
    if (static_cast<std::size_t>(id) < first || local >= count) continue;
    std::copy(table.begin() + static_cast<long>(local * d), table.begin() + static_cast<long>((local + 1) * d), rows.begin() + static_cast<long>(i * d));
  }
  nn::Tensor x = nn::Tensor::from(rows, tokens.size(), d, wte.value.device());
  std::size_t first_row = 0;
  if (sequence_parallel) {
    x = reduce_scatter_rows(tp, x);
    first_row = static_cast<std::size_t>(tp.rank()) * x.rows();
  } else {
    all_reduce(tp, x);
  }
  std::vector<float> out = x.to_host();
  const std::vector<float> positions = wpe.value.to_host();
  for (std::size_t i = 0; i < x.rows(); ++i) {
    const std::size_t pos = (first_row + i) % T;
    for (std::size_t c = 0; c < d; ++c) out[i * d + c] += positions[pos * d + c];
  }
  x.assign(out);
  nn::round_in_place(x);
  return x;
}

void VocabParallelEmbedding::backward(const nn::Tensor& dx, const std::vector<int>& tokens, std::size_t T) {
  const std::size_t d = wte.value.cols(), count = wte.value.rows();
  const nn::Tensor whole = sequence_parallel ? gather_rows(tp, dx) : dx.clone();
  if (T == 0 || whole.rows() != tokens.size() || whole.cols() != d || tokens.size() % T != 0) {
    throw std::invalid_argument("VocabParallelEmbedding backward: dx " + whole.shape() + " for " + std::to_string(tokens.size()) + " tokens");
  }
  const std::vector<float> g = whole.to_host();
  std::vector<float> dwte = wte.grad.empty() ? std::vector<float>(count * d, 0.0f) : wte.grad.to_host();
  std::vector<float> dwpe = wpe.grad.empty() ? std::vector<float>(wpe.value.size(), 0.0f) : wpe.grad.to_host();
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::size_t id = static_cast<std::size_t>(tokens[i]), pos = i % T;
    const bool mine = id >= first && id - first < count;
    for (std::size_t c = 0; c < d; ++c) {
      if (mine) dwte[(id - first) * d + c] += g[i * d + c];
      dwpe[pos * d + c] += g[i * d + c];
    }
  }
  if (!wte.frozen) {
    wte.grad = nn::Tensor::from(dwte, count, d, wte.value.device());
    nn::round_in_place(wte.grad);
  }
  if (!wpe.frozen) {
    wpe.grad = nn::Tensor::from(dwpe, wpe.value.rows(), d, wpe.value.device());
    nn::round_in_place(wpe.grad);
  }
}

double vocab_parallel_cross_entropy(Communicator& tp, const nn::Tensor& h, nn::Parameter& wte, std::size_t vocab, const std::vector<int>& targets,
                                    nn::Tensor* dh) {
  const std::size_t t = static_cast<std::size_t>(tp.size()), R = h.rows(), count = wte.value.rows();
  const std::size_t first = slice_begin(vocab, tp.size(), tp.rank(), "the vocabulary");
  if (count * t != vocab || targets.size() != R) {
    throw std::invalid_argument("vocab_parallel_cross_entropy: " + std::to_string(targets.size()) + " targets for " + std::to_string(R) + " rows, " +
                                std::to_string(count) + " vocabulary rows here of " + std::to_string(vocab));
  }
  for (const int id : targets) {
    if (id < 0 || static_cast<std::size_t>(id) >= vocab) throw std::invalid_argument("vocab_parallel_cross_entropy: target " + std::to_string(id) + " outside [0, " + std::to_string(vocab) + ")");
  }
  nn::Tensor logits = nn::Tensor::uninitialized(R, count, h.device());
  nn::gemm(h, false, wte.value, true, logits);  // h·wte_rᵀ
  nn::round_in_place(logits);
  std::vector<float> l = logits.to_host();
  // The row maxima over the whole vocabulary: R floats from every rank.
  std::vector<float> mine(R);
  for (std::size_t i = 0; i < R && count > 0; ++i) mine[i] = *std::max_element(l.begin() + static_cast<long>(i * count), l.begin() + static_cast<long>((i + 1) * count));
  nn::Tensor local_max = nn::Tensor::from(mine, 1, R, h.device()), maxima = nn::Tensor::uninitialized(1, R * t, h.device());
  CollectiveRequest gather = tp.iall_gather(local_max.data(), maxima.data(), R * t, "row maxima");
  tp.wait(gather);
  const std::vector<float> all = maxima.to_host();
  std::vector<float> m(R), sums(2 * R, 0.0f);
  for (std::size_t i = 0; i < R; ++i) {
    m[i] = all[i];
    for (std::size_t k = 1; k < t; ++k) m[i] = std::max(m[i], all[k * R + i]);
    float s = 0.0f;
    for (std::size_t j = 0; j < count; ++j) s += std::exp(l[i * count + j] - m[i]);
    sums[i] = s;
    const std::size_t id = static_cast<std::size_t>(targets[i]);
    if (id >= first && id - first < count) sums[R + i] = l[i * count + (id - first)] - m[i];
  }
  nn::Tensor reduced = nn::Tensor::from(sums, 1, 2 * R, h.device());
  all_reduce(tp, reduced);
  const std::vector<float> S = reduced.to_host();
  double loss = 0.0;
  for (std::size_t i = 0; i < R; ++i) loss += static_cast<double>(std::log(S[i]) - S[R + i]);
  loss /= static_cast<double>(R);
  if (dh != nullptr) {
    const float inv = 1.0f / static_cast<float>(R);
    for (std::size_t i = 0; i < R; ++i) {
      const std::size_t id = static_cast<std::size_t>(targets[i]);
      for (std::size_t j = 0; j < count; ++j) {
        const float p = std::exp(l[i * count + j] - m[i]) / S[i];
        l[i * count + j] = ((first + j == id ? p - 1.0f : p)) * inv;
      }
    }
    const nn::Tensor dlogits = nn::Tensor::from(l, R, count, h.device());
    if (!wte.frozen) {
      if (wte.grad.empty()) wte.grad = nn::Tensor(count, wte.value.cols(), wte.value.device());
      nn::gemm(dlogits, true, h, false, wte.grad, 1.0f, 1.0f);
      nn::round_in_place(wte.grad);
    }
    *dh = nn::Tensor::uninitialized(R, h.cols(), h.device());
    nn::gemm(dlogits, false, wte.value, false, *dh);
    nn::round_in_place(*dh);
    all_reduce(tp, *dh);
  }
  return loss;
}
// STUB: nn::Tensor VocabParallelEmbedding::forward(const std::vector<int>& tokens, std::size_t T) {
// STUB:   (void)tokens; (void)T;  // delete once you use them
// STUB:   return nn::Tensor();
// STUB: }
// STUB:
// STUB: void VocabParallelEmbedding::backward(const nn::Tensor& dx, const std::vector<int>& tokens, std::size_t T) {
// STUB:   (void)dx; (void)tokens; (void)T;  // delete once you use them
// STUB: }
// STUB:
// STUB: double vocab_parallel_cross_entropy(Communicator& tp, const nn::Tensor& h, nn::Parameter& wte, std::size_t vocab, const std::vector<int>& targets,
// STUB:                                     nn::Tensor* dh) {
// STUB:   (void)tp; (void)h; (void)wte; (void)vocab; (void)targets; (void)dh;  // delete once you use them
// STUB:   return 0.0;
// STUB: }
// END SOLUTION

}  // namespace lab10
