/// @file bench.cpp
/// @brief Event timing with time-based warm-up, L2 flush and medians.
#include "gpulab/bench.hpp"

#include <algorithm>
#include <chrono>

#include "gpulab/check.hpp"
#include "gpulab/device.hpp"
#include "gpulab/device_buffer.hpp"
#include "gpulab/stats.hpp"

namespace gpulab {
namespace {

/// RAII pair of events.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
};

double host_ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

BenchResult bench(const std::function<void(cudaStream_t)>& work, const BenchOptions& options) {
  const cudaStream_t stream = options.stream;
  // The flush buffer: twice the L2, written then read before each sample (outside the events).
  DeviceBuffer<unsigned char> flush;
  if (options.flush_l2) flush = DeviceBuffer<unsigned char>(2 * query_device().l2_bytes + (1 << 20));

  const auto warm_start = std::chrono::steady_clock::now();
  do {
    work(stream);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaStreamSynchronize(stream));
  } while (host_ms_since(warm_start) < options.warmup_ms);

  EventPair events;
  BenchResult result;
  const GpuState before = read_gpu_state();
  const auto sample_start = std::chrono::steady_clock::now();
  while (static_cast<int>(result.samples_ms.size()) < options.max_samples) {
    if (static_cast<int>(result.samples_ms.size()) >= options.min_samples &&
        host_ms_since(sample_start) > options.budget_ms) {
      break;
    }
    if (options.flush_l2) flush_l2(flush.data(), flush.bytes(), stream);
    CUDA_CHECK(cudaEventRecord(events.start, stream));
    work(stream);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaEventRecord(events.stop, stream));
    CUDA_CHECK(cudaEventSynchronize(events.stop));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, events.start, events.stop));
    result.samples_ms.push_back(ms);
  }
  result.gpu = gpu_state_between(before, read_gpu_state());
  result.median_ms = median(result.samples_ms);
  result.min_ms = *std::min_element(result.samples_ms.begin(), result.samples_ms.end());
  result.max_ms = *std::max_element(result.samples_ms.begin(), result.samples_ms.end());
  result.cv = coefficient_of_variation(result.samples_ms);
  result.warmup_ms = options.warmup_ms;
  result.flushed_l2 = options.flush_l2;
  return result;
}

std::string BenchResult::describe() const {
  return "median of " + std::to_string(samples_ms.size()) + " CUDA-event samples after " +
         std::to_string(static_cast<long>(warmup_ms + 0.5)) + " ms of warm-up" + (flushed_l2 ? ", the L2 flushed before each" : "");
}

double measure_d2d_memcpy_gbs(std::size_t bytes, const BenchOptions& options) {
  DeviceBuffer<unsigned char> src(bytes), dst(bytes);
  src.fill_bytes(0x3C);
  const BenchResult r = bench(
      [&](cudaStream_t s) {
        CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, s));
      },
      options);
  return gb_per_s(2.0 * static_cast<double>(bytes), r.median_ms);
}

std::size_t bandwidth_problem_elements(std::size_t element_bytes, int arrays,
                                       std::size_t cap_bytes) {
  const MemoryInfo mem = device_memory();
  const std::size_t per_array_free = mem.free_bytes / 2 / static_cast<std::size_t>(arrays);
  std::size_t per_array = std::min(cap_bytes, per_array_free);
  // Prefer ≥ 4 × L2 per array; on small cards the cap by free memory wins.
  const std::size_t want = 4 * query_device().l2_bytes;
  if (per_array < want && per_array_free >= want) per_array = want;
  return per_array / element_bytes / 1024 * 1024;
}

}  // namespace gpulab
