/// @file gpulab_device_test.hpp
/// @brief Checks on device buffers shared by the kernel labs' tests: guard bands intact, inputs
/// unmodified. Each records its finding (see gpulab_test.hpp) and CHECKs it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <vector>

#include "gpulab/check.hpp"

#include "gpulab/compare.hpp"
#include "gpulab/device.hpp"
#include "gpulab/device_buffer.hpp"
#include "gpulab/peaks.hpp"
#include "gpulab_test.hpp"

namespace gpulab::testing {

/// Checks a buffer's guard bands: a write outside [0, size) fails even if every value is right.
template <class T>
void check_guards(const DeviceBuffer<T>& buffer, const std::string& name) {
  const GuardReport g = buffer.check_guards();
  check_fact(g.intact, name + " guard bands", g.describe(name),
             "a thread wrote outside the array: test the index against the size before writing");
}

/// Checks that a kernel left an input exactly as it was (and inside its guards).
template <class T>
void check_unmodified(const DeviceBuffer<T>& buffer, const std::vector<T>& original, const std::string& name) {
  check_result(compare_bitwise(buffer.download(), original), name + " unmodified",
               "an input array was written to; only the output may change");
  check_guards(buffer, name);
}

/// The GPU's clock, temperature and slowdowns right now, as record fields (empty without NVML).
/// Performance tests add them to their records; the grader warns when the GPU was slowing down.
inline nlohmann::json gpu_state_fields() {
  const GpuState s = read_gpu_state();
  if (!s.available) return nlohmann::json::object();
  return {{"sm_clock_mhz", s.sm_clock_mhz}, {"temperature_c", s.temperature_c}, {"slowdowns", s.slowdowns}};
}

/// This device's measured ceilings (gpulab/peaks.hpp: cached per device) as record fields: the
/// grader states a kernel's figure as a fraction of them and draws the roofline with them.
inline nlohmann::json peak_fields() {
  const DevicePeaks p = measured_peaks();
  return {{"peak_gflops", p.fma_gflops}, {"peak_gbs", p.copy_gbs}, {"peaks_measured_at", p.measured_at}};
}

/// What the compiler and the occupancy calculator say of a kernel launched with @p threads threads
/// per block and @p dynamic_smem bytes of dynamic shared memory, as record fields: registers per
/// thread, static shared and local (spill / run-time-indexed array) bytes per thread, blocks per
/// SM and the theoretical occupancy (resident threads / the SM's maximum) from the CUDA occupancy
/// API. The grader prints them beside each performance figure, the learner's beside the reference's.
inline nlohmann::json kernel_fields(const void* kernel, int threads, std::size_t dynamic_smem = 0) {
  cudaFuncAttributes a{};
  CUDA_CHECK(cudaFuncGetAttributes(&a, kernel));
  int blocks = 0, device = 0, max_threads = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, dynamic_smem));
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&max_threads, cudaDevAttrMaxThreadsPerMultiProcessor, device));
  return {{"registers", a.numRegs},
          {"static_smem_bytes", a.sharedSizeBytes},
          {"dynamic_smem_bytes", dynamic_smem},
          {"local_bytes", a.localSizeBytes},
          {"threads_per_block", threads},
          {"blocks_per_sm", blocks},
          {"occupancy", max_threads > 0 ? static_cast<double>(blocks) * threads / max_threads : 0.0}};
}

}  // namespace gpulab::testing
