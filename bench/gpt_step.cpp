/// @file gpt_step.cpp
/// @brief gpulab's side of the GPT side-by-side (bench/peers/gpt-side-by-side runs both): training
/// steps of GPTConfig::tiny() on the course's lessons, one thread, the batch and optimiser of
/// bench/peers/gpt_torch.py. Prints one line:
///   gpulab: <tokens/s> tokens/s (<ms> ms/step, median of <n> steps), loss <first> -> <last>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "gpulab/nn_gpt.hpp"

namespace nn = gpulab::nn;

int main(int argc, char** argv) {
  CLI::App app{"gpulab::nn's GPT tiny(): training steps per second on the host, one thread"};
  std::string lessons = GPULAB_LESSONS_DIR;
  std::size_t batch = 8, steps = 30, warmup = 5;
  app.add_option("--lessons", lessons, "the lessons folder (the corpus)");
  app.add_option("--batch", batch, "windows of 128 bytes per step");
  app.add_option("--steps", steps, "measured steps");
  app.add_option("--warmup", warmup, "steps run first, not measured");
  CLI11_PARSE(app, argc, argv);

  const nn::ByteCorpus corpus = nn::lessons_corpus(lessons);
  const nn::GPTConfig config = nn::GPTConfig::tiny();
  nn::GPT model(config, 0);
  nn::AdamW adam(3e-3f, 0.9f, 0.95f, 1e-8f, 0.0f);  // the peer's: lr 3e-3, betas (0.9, 0.95), no decay
  const std::size_t T = config.context;
  std::vector<double> ms;
  double first = 0.0, last = 0.0;
  for (std::size_t s = 0; s < warmup + steps; ++s) {
    const nn::Windows w = nn::sample_windows(corpus.train, T, batch, 1, s);  // drawn outside the timed step, as the peer's
    const nn::TokenBatch tokens{w.inputs, nn::Pass{T, s, true}};
    const auto start = std::chrono::steady_clock::now();
    model.zero_grad();
    std::vector<nn::Saved> saved;
    nn::Tensor dlogits;
    last = nn::softmax_cross_entropy(model.forward(tokens, saved), w.targets, &dlogits);
    model.backward(tokens, dlogits, saved);
    adam.step(model.parameters());
    const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (s == 0) first = last;
    if (s >= warmup) ms.push_back(elapsed);
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms.size() % 2 == 1 ? ms[ms.size() / 2] : 0.5 * (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]);
  std::printf("gpulab (%s): %.0f tokens/s (%.1f ms/step, median of %zu steps), loss %.3f -> %.3f (ln 256 = %.3f)\n",
              nn::host_gemm_backend().c_str(), static_cast<double>(batch * T) / (median / 1000.0), median, ms.size(), first, last, std::log(256.0));
}
