/// @file mlp_step.cpp
/// @brief gpulab's side of the MLP side-by-side (bench/peers/side-by-side mlp): training steps of
/// gpulab::nn's MLP on the host, one thread, as bench/peers.json's "mlp" describes them.
///   gpulab-bench-mlp                 one line: gpulab (<gemm>): <ms> ms/step (median of <n>), <samples/s>, loss <a> -> <b>
///   gpulab-bench-mlp --export DIR    one step's weights, batch, loss and gradients (DIR/mlp.json,
///                                    DIR/mlp.bin), for bench/peers/torch_peers.py check-mlp
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_config.hpp"
#include "gpulab/nn.hpp"

namespace nn = gpulab::nn;

int main(int argc, char** argv) {
  CLI::App app{"gpulab::nn's MLP: training steps per second on the host, one thread"};
  std::string config_path = GPULAB_PEERS_CONFIG, export_dir;
  app.add_option("--config", config_path, "the side-by-side configuration (bench/peers.json)");
  app.add_option("--export", export_dir, "write one step's weights, batch, loss and gradients here instead of timing")->check(CLI::ExistingDirectory);
  CLI11_PARSE(app, argc, argv);
  try {
    const nlohmann::json c = gpulab::bench::load_config(config_path).at("mlp");
    const auto widths = c.at("widths").get<std::vector<std::size_t>>();
    const std::size_t batch = c.at("batch"), samples = c.at("data_samples");
    const nn::Dataset data = nn::teacher_dataset(samples, widths.front(), widths.back(), c.at("data_seed").get<std::uint64_t>());
    nn::Sequential model = nn::Sequential::mlp(widths, "relu", c.at("model_seed").get<std::uint64_t>());
    nn::SGD sgd(c.at("lr").get<float>(), c.at("momentum").get<float>());
    // The batch is gathered outside the timed step, as the peer's is.
    auto take = [&](std::size_t s, std::vector<int>& labels) { return data.batch(gpulab::bench::batch_indices(samples, batch, 1, 0, s), labels); };
    auto train = [&](const nn::Tensor& x, const std::vector<int>& labels, bool update) {
      model.zero_grad();
      std::vector<nn::Saved> saved;
      nn::Tensor dlogits;
      const double loss = nn::softmax_cross_entropy(model.forward(x, saved), labels, &dlogits);
      (void)model.backward(dlogits, saved);
      if (update) sgd.step(model.parameters());
      return loss;
    };
    if (!export_dir.empty()) {
      gpulab::bench::Export out;
      for (nn::Parameter* p : model.parameters()) out.add("value:" + p->name, p->value);
      std::vector<int> labels;
      const nn::Tensor x = take(0, labels);
      model.zero_grad();
      const gpulab::bench::Trace t = gpulab::bench::trace_step(model, x, labels);
      const double loss = t.loss;
      for (nn::Parameter* p : model.parameters()) out.add("grad:" + p->name, p->grad);
      out.add("x", x);
      gpulab::bench::add_trace(out, t, model.size(), [](const nn::Tensor& v) { return v.clone(); });
      out.write(export_dir, "mlp", {{"loss", loss}, {"labels", labels}, {"widths", widths}, {"ranks", 1}, {"batch_per_rank", batch},
                                    {"what", "gpulab::nn, one process: the batch's mean loss and its gradients"}});
      std::printf("gpulab: exported one step of the MLP to %s/mlp.{json,bin} (loss %.6f)\n", export_dir.c_str(), loss);
      return 0;
    }
    const std::size_t warmup = c.at("warmup"), steps = c.at("steps");
    std::vector<double> ms;
    double first = 0.0, last = 0.0;
    for (std::size_t s = 0; s < warmup + steps; ++s) {
      std::vector<int> labels;
      const nn::Tensor x = take(s, labels);
      const auto t0 = std::chrono::steady_clock::now();
      last = train(x, labels, true);
      const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (s == 0) first = last;
      if (s >= warmup) ms.push_back(elapsed);
    }
    const double median = gpulab::bench::median(ms);
    std::printf("gpulab (%s): %.3f ms/step (median of %zu steps), %.0f samples/s, loss %.3f -> %.3f\n", nn::host_gemm_backend().c_str(), median,
                ms.size(), static_cast<double>(batch) / (median / 1000.0), first, last);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpulab-bench-mlp: %s\n", e.what());
    return 2;
  }
}
