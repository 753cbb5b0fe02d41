/// @file bench.hpp
/// @brief Timing GPU work the way the grader trusts: CUDA events around the work only, a warm-up
/// measured in time (not a launch count), the L2 flushed before each sample, the median reported.
///
/// Why each rule: the first launches pay for module loading and clock ramp-up (hence ≥ 200 ms of
/// warm-up); an L2 of 50+ MB would otherwise serve a second pass of a small array from cache; a
/// median resists the odd slow sample that a mean does not.
#pragma once

#include <cuda_runtime_api.h>

#include "gpulab/device.hpp"

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace gpulab {

/// How to time.
struct BenchOptions {
  double warmup_ms = 200.0;    ///< run the work until this much wall time has passed
  int min_samples = 11;        ///< timed samples to take at least
  int max_samples = 101;       ///< and at most
  double budget_ms = 2000.0;   ///< stop adding samples (past min_samples) after this much time
  bool flush_l2 = true;        ///< overwrite the L2 before each sample
  cudaStream_t stream = nullptr;  ///< the stream the work is enqueued on
};

/// Timings in milliseconds.
struct BenchResult {
  std::vector<double> samples_ms;  ///< every timed sample, in order
  double median_ms = 0.0;          ///< the figure to report
  double min_ms = 0.0;             ///< fastest sample
  double max_ms = 0.0;             ///< slowest sample
  double cv = 0.0;  ///< coefficient of variation of the samples
  GpuState gpu;             ///< the GPU across the timed samples (gpu_state_between: before and after them)
  double warmup_ms = 0.0;   ///< the warm-up the samples followed
  bool flushed_l2 = false;  ///< whether the L2 was flushed before each sample
  /// How the figure was taken, from these fields, for the scorecard: "median of 15 CUDA-event
  /// samples after 200 ms of warm-up, the L2 flushed before each".
  std::string describe() const;
};

/// Times @p work (which enqueues GPU work on the given stream) per the options.
BenchResult bench(const std::function<void(cudaStream_t)>& work, const BenchOptions& options = {});

/// Evicts the L2 by writing and then reading @p bytes of @p buffer on @p stream: the timed work
/// that follows starts with an L2 holding the flush buffer's clean lines, not its dirty ones
/// (a memset alone would leave them for the timed kernel to write back).
void flush_l2(unsigned char* buffer, std::size_t bytes, cudaStream_t stream);

/// GB/s for @p bytes moved in @p ms (1 GB = 10⁹ bytes, as NVIDIA's datasheets count).
inline double gb_per_s(double bytes, double ms) { return ms > 0.0 ? bytes / (ms * 1e6) : 0.0; }

/// The bandwidth baseline: device-to-device cudaMemcpy of @p bytes, counting read + write
/// (2 × bytes per copy), median GB/s under the same rules as bench().
double measure_d2d_memcpy_gbs(std::size_t bytes, const BenchOptions& options = {});

/// Elements of @p element_bytes each for a bandwidth test with @p arrays arrays: as large as
/// @p cap_bytes per array, at most half of the free memory in total, at least 4 × L2 per array
/// when memory allows (so that no array fits in cache). Rounded down to a multiple of 1024.
std::size_t bandwidth_problem_elements(std::size_t element_bytes, int arrays,
                                       std::size_t cap_bytes = std::size_t{1} << 30);

}  // namespace gpulab
