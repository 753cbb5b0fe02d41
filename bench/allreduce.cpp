/// @file allreduce.cpp
/// @brief gpulab's side of the all-reduce side-by-side (bench/peers/side-by-side 07): lab 07's
/// reference ring_allreduce on host buffers through the MPI Communicator, and the Communicator's
/// library all-reduce, on W MPI ranks at bench/peers.json's sizes, timed as lab 07's test times
/// them (gpulab::dist::time_collective: the median of samples runs, each the slowest rank's).
/// Rank 0 prints one line per size: gpulab-allreduce W=<w> floats=<n> ring_s=<s> library_s=<s>
/// ring_busbw=<GB/s> library_busbw=<GB/s>.
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_config.hpp"
#include "bench_mpi.hpp"
#include "gpulab/dist.hpp"
#include "gpulab/dist_bench.hpp"
#include "ring.hpp"

namespace {

int run(int argc, char** argv) {
  CLI::App app{"lab 07's reference ring all-reduce: bus bandwidth on W MPI ranks"};
  std::string config_path = GPULAB_PEERS_CONFIG;
  app.add_option("--config", config_path, "the side-by-side configuration (bench/peers.json)");
  CLI11_PARSE(app, argc, argv);
  const nlohmann::json c = gpulab::bench::load_config(config_path).at("allreduce");
  auto comm = gpulab::dist::Communicator::create(gpulab::dist::Backend::kMpi);
  const int w = comm->size(), r = comm->rank();
  const int samples = c.at("samples");
  const double warmup_s = c.at("warmup_s");
  for (const std::size_t n : c.at("floats").get<std::vector<std::size_t>>()) {
    std::vector<float> data(n), out(n);
    for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<float>((i * 7 + static_cast<std::size_t>(r) * 13) % 1000) / 1000.0f;
    const double ring = gpulab::dist::time_collective([&] { lab07::ring_allreduce(*comm, data.data(), out.data(), n); }, MPI_COMM_WORLD, samples, warmup_s).median_s;
    const double lib = gpulab::dist::time_collective([&] { comm->allreduce_sum(data.data(), out.data(), n); }, MPI_COMM_WORLD, samples, warmup_s).median_s;
    const double bytes = static_cast<double>(n * sizeof(float));
    using gpulab::dist::Collective;
    if (r == 0) {
      std::printf("gpulab-allreduce W=%d floats=%zu ring_s=%.6f library_s=%.6f ring_busbw=%.3f library_busbw=%.3f\n", w, n, ring, lib,
                  gpulab::dist::busbw_gbs(Collective::kAllReduce, bytes, ring, w), gpulab::dist::busbw_gbs(Collective::kAllReduce, bytes, lib, w));
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return gpulab::bench::mpi_main(argc, argv, "gpulab-bench-allreduce", run); }
