/// @file dist_bench.cpp
/// @brief Timing collectives and their bus bandwidth (see dist_bench.hpp).
#include "gpulab/dist_bench.hpp"

#include <vector>

#include "gpulab/stats.hpp"

namespace gpulab::dist {

double busbw_factor(Collective op, int ranks) {
  const double w = ranks;
  return op == Collective::kAllReduce ? 2.0 * (w - 1) / w : (w - 1) / w;
}

double busbw_gbs(Collective op, double bytes, double seconds, int ranks) {
  return seconds > 0.0 ? bytes / seconds * busbw_factor(op, ranks) / 1e9 : 0.0;
}

std::string CollectiveTiming::describe() const {
  return "median of " + std::to_string(samples) + " timed runs (each the slowest rank's, between barriers) after " +
         std::to_string(static_cast<long>(warmup_s * 1000 + 0.5)) + " ms of warm-up";
}

CollectiveTiming time_collective(const std::function<void()>& run, MPI_Comm comm, int samples, double warmup_s) {
  const double warm_until = MPI_Wtime() + warmup_s;
  for (int keep_going = 1; keep_going;) {
    run();
    int mine = MPI_Wtime() < warm_until ? 1 : 0;
    PMPI_Allreduce(&mine, &keep_going, 1, MPI_INT, MPI_MAX, comm);
  }
  std::vector<double> times;
  for (int k = 0; k < samples; ++k) {
    PMPI_Barrier(comm);
    const double t0 = MPI_Wtime();
    run();
    double mine = MPI_Wtime() - t0, slowest = 0.0;
    PMPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
    times.push_back(slowest);
  }
  return {median(times), samples, warmup_s};
}

}  // namespace gpulab::dist
