/// @file ddp_step.cpp
/// @brief gpulab's side of the data-parallel side-by-side (bench/peers/side-by-side 08): lab 08's
/// reference on W MPI ranks (mpirun -np W, as the grader runs it), the MLP and batches of
/// bench/peers.json, one thread per rank. The step's variants take turns, round after round:
///   compute   forward, backward, SGD, no communication
///   ddp       the same with the Reducer (buckets overlapped with backward)
///   no_sync   micro_batches backward passes, all but the last under set_sync(false), then SGD
///   zero1     forward, backward, ZeroAdamW::step (reduce-scatter, a shard's AdamW, all-gather)
///   adamw     forward, backward, a local AdamW step (zero1's compute-only twin)
/// Each step's time is the slowest rank's; rank 0 prints the medians as key=value and a sentence.
///   gpulab-bench-ddp --export DIR    rank 0 writes the weights, the W ranks' batches, the mean
///                                    loss and the Reducer's averaged gradients (DIR/ddp.*)
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_config.hpp"
#include "bench_mpi.hpp"
#include "ddp.hpp"
#include "gpulab/dist.hpp"
#include "gpulab/nn.hpp"

namespace nn = gpulab::nn;
using gpulab::dist::Communicator;

namespace {

double slowest(double mine) {
  double worst = 0.0;
  PMPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

int run(int argc, char** argv) {
  CLI::App app{"lab 08's reference: data-parallel step times on W MPI ranks"};
  std::string config_path = GPULAB_PEERS_CONFIG, export_dir;
  app.add_option("--config", config_path, "the side-by-side configuration (bench/peers.json)");
  app.add_option("--export", export_dir, "write one averaged step's weights, batches and gradients here instead of timing");
  CLI11_PARSE(app, argc, argv);
  const nlohmann::json all = gpulab::bench::load_config(config_path), c = all.at("mlp"), d = all.at("ddp");
  auto comm = Communicator::create(gpulab::dist::Backend::kMpi);
  const int w = comm->size(), r = comm->rank();
  const auto widths = c.at("widths").get<std::vector<std::size_t>>();
  const std::size_t batch = d.at("batch_per_rank"), samples = c.at("data_samples");
  const nn::Dataset data = nn::teacher_dataset(samples, widths.front(), widths.back(), c.at("data_seed").get<std::uint64_t>());
  nn::Sequential model = nn::Sequential::mlp(widths, "relu", c.at("model_seed").get<std::uint64_t>());
  const std::vector<nn::Parameter*> params = model.parameters();
  lab08::Reducer reducer(*comm, params, d.at("first_bucket_bytes").get<std::size_t>(), d.at("bucket_cap_bytes").get<std::size_t>());
  auto take = [&](std::size_t s, std::vector<int>& labels) { return data.batch(gpulab::bench::batch_indices(samples, batch, w, r, s), labels); };
  // One forward and backward; with hooks, the Reducer's.
  auto pass = [&](const nn::Tensor& x, const std::vector<int>& labels, bool hooks) {
    std::vector<nn::Saved> saved;
    nn::Tensor dlogits;
    const double loss = nn::softmax_cross_entropy(model.forward(x, saved), labels, &dlogits);
    if (hooks) {
      (void)model.backward(dlogits, saved, [&](nn::Parameter& p) { reducer.grad_ready(p); }, [&] { reducer.backward_done(); });
    } else {
      (void)model.backward(dlogits, saved);
    }
    return loss;
  };

  if (!export_dir.empty()) {
    gpulab::bench::Export out;
    for (nn::Parameter* p : params) out.add("value:" + p->name, p->value);
    std::vector<int> labels;
    const nn::Tensor x = take(0, labels);
    model.zero_grad();
    double loss = pass(x, labels, true), sum = 0.0;
    PMPI_Allreduce(&loss, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    std::vector<int> all_labels;
    if (r == 0) {
      for (nn::Parameter* p : params) out.add("grad:" + p->name, p->grad);
      // Every rank's batch, in rank order (the data set is the same on every rank).
      std::vector<std::size_t> everything;
      for (int k = 0; k < w; ++k) {
        const auto idx = gpulab::bench::batch_indices(samples, batch, w, k, 0);
        everything.insert(everything.end(), idx.begin(), idx.end());
      }
      out.add("x", data.batch(everything, all_labels));
    }
    // The same pass again, layer by layer (what the check reads of it, every rank's rows gathered
    // in rank order); it adds to the gradients, which were written above.
    const gpulab::bench::Trace t = gpulab::bench::trace_step(model, x, labels);
    gpulab::bench::add_trace(out, t, model.size(), [&](const nn::Tensor& v) {
      const std::vector<float> mine = v.to_host();
      std::vector<float> all(r == 0 ? mine.size() * static_cast<std::size_t>(w) : 0);
      PMPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_FLOAT, all.data(), static_cast<int>(mine.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
      return r == 0 ? nn::Tensor::from(all, v.rows() * static_cast<std::size_t>(w), v.cols()) : v.clone();
    });
    if (r == 0) {
      out.write(export_dir, "ddp", {{"loss", sum / w}, {"labels", all_labels}, {"widths", widths}, {"ranks", w}, {"batch_per_rank", batch},
                                    {"what", "lab 08's Reducer: the gradients averaged over the ranks, each rank's loss averaged"}});
      std::printf("gpulab: exported one averaged step of lab 08's Reducer on %d ranks to %s/ddp.{json,bin}\n", w, export_dir.c_str());
    }
    return 0;
  }

  nn::SGD sgd(c.at("lr").get<float>(), c.at("momentum").get<float>());
  const float adamw_lr = d.at("adamw_lr").get<float>();
  nn::AdamW adamw(adamw_lr, 0.9f, 0.999f, 1e-8f, 0.01f);  // torch.optim.AdamW's defaults but the rate
  lab08::ZeroAdamW zero(*comm, params, adamw_lr, 0.9f, 0.999f, 1e-8f, 0.01f);
  const int micro = d.at("micro_batches");
  const char* names[] = {"compute", "ddp", "no_sync", "zero1", "adamw"};
  std::vector<std::vector<double>> ms(5);
  const int warmup = d.at("warmup_rounds"), rounds = d.at("rounds");
  std::size_t s = 0;
  for (int round = 0; round < warmup + rounds; ++round) {
    for (int v = 0; v < 5; ++v) {
      // The batches are gathered before the clock starts, as the peer's.
      std::vector<std::vector<int>> labels(static_cast<std::size_t>(micro));
      std::vector<nn::Tensor> xs;
      for (int m = 0; m < (v == 2 ? micro : 1); ++m) xs.push_back(take(s++, labels[static_cast<std::size_t>(m)]));
      PMPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      model.zero_grad();
      if (v == 2) {
        for (int m = 0; m < micro; ++m) {
          reducer.set_sync(m == micro - 1);
          (void)pass(xs[static_cast<std::size_t>(m)], labels[static_cast<std::size_t>(m)], true);
        }
      } else {
        (void)pass(xs[0], labels[0], v == 1);
      }
      if (v <= 2) sgd.step(params);
      if (v == 3) zero.step();
      if (v == 4) adamw.step(params);
      const double t = slowest(MPI_Wtime() - t0);
      if (round >= warmup) ms[static_cast<std::size_t>(v)].push_back(t * 1e3);
    }
  }
  if (r == 0) {
    double m[5];
    std::printf("gpulab-ddp W=%d", w);
    for (int v = 0; v < 5; ++v) std::printf(" %s_ms=%.4f", names[v], m[v] = gpulab::bench::median(ms[static_cast<std::size_t>(v)]));
    std::printf("\ngpulab (lab 08's reference, %d ranks, medians of %d rounds): compute-only %.2f ms; DDP %.2f ms (exposed %.2f ms); no_sync x%d %.2f ms; "
                "ZeRO-1 %.2f ms (exposed %.2f ms beside a local AdamW step)\n",
                w, rounds, m[0], m[1], m[1] - m[0], micro, m[2], m[3], m[3] - m[4]);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return gpulab::bench::mpi_main(argc, argv, "gpulab-bench-ddp", run); }
