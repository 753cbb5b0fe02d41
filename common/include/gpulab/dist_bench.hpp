/// @file dist_bench.hpp
/// @brief Timing collectives across ranks, and the figures nccl-tests reports for them, in one
/// place for every distributed lab. The harness's own communication goes through PMPI_* so it is
/// never counted against the learner (dist.hpp's LearnerScope).
///
///     algbw = bytes / time                                   (bytes of one rank's buffer)
///     busbw = algbw · 2(W − 1)/W   for all-reduce            (nccl-tests' PERFORMANCE.md: the
///             algbw · (W − 1)/W    for reduce-scatter and all-gather   per-link traffic of an
///                                                            optimal algorithm, comparable across W)
#pragma once

#include <mpi.h>

#include <functional>
#include <string>

#include "gpulab/dist.hpp"

namespace gpulab::dist {

/// nccl-tests' bus-bandwidth factor for @p op on @p ranks ranks: 2(W − 1)/W or (W − 1)/W.
double busbw_factor(Collective op, int ranks);
/// busbw in GB/s (10⁹ bytes) for @p bytes per rank moved in @p seconds.
double busbw_gbs(Collective op, double bytes, double seconds, int ranks);

/// How a collective was timed.
struct CollectiveTiming {
  double median_s = 0.0;  ///< the median of the samples, each the slowest rank's time
  int samples = 0;         ///< timed runs after the warm-up
  double warmup_s = 0.0;   ///< seconds of warm-up before them
  /// "median of 11 timed runs (each the slowest rank's, between barriers) after 200 ms of warm-up"
  std::string describe() const;
};

/// Times @p run on every rank of @p comm: warm-up until @p warmup_s has passed on every rank,
/// then @p samples runs, each between barriers and taken as the slowest rank's time (a
/// collective is done when its last rank is). Collective: every rank must call it.
CollectiveTiming time_collective(const std::function<void()>& run, MPI_Comm comm = MPI_COMM_WORLD, int samples = 11,
                                 double warmup_s = 0.2);

}  // namespace gpulab::dist
