/// @file gpulab_device_test.hpp
/// @brief Checks on device buffers shared by the kernel labs' tests: guard bands intact, inputs
/// unmodified. Each records its finding (see gpulab_test.hpp) and CHECKs it.
#pragma once

#include <cuda_runtime_api.h>
#include <cxxabi.h>

#include <cstddef>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "gpulab/bench.hpp"
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
  check_bitwise(buffer.download(), original, name + " unmodified",
                "an input array was written to; only the output may change");
  check_guards(buffer, name);
}

/// The GPU's clock, temperature and slowdowns across the timed samples of @p timed (bench()
/// reads NVML before and after them, violation counters included), as record fields (empty
/// without NVML). Performance tests add them to their records; the grader warns when the GPU was
/// held back while it was timed.
inline nlohmann::json gpu_state_fields(const BenchResult& timed) {
  const GpuState& s = timed.gpu;
  if (!s.available) return nlohmann::json::object();
  return {{"sm_clock_mhz", s.sm_clock_mhz}, {"temperature_c", s.temperature_c}, {"slowdowns", s.slowdowns},
          {"power_limited_ms", s.power_violation_ns / 1e6}, {"thermal_limited_ms", s.thermal_violation_ns / 1e6}};
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

/// The kernels that @p work launches on the stream it is handed, each with its kernel_fields(),
/// name, grid and block: found by capturing @p work into a CUDA graph (stream capture), so nothing
/// runs and no interface has to name the kernels. Work that launches on another stream (the
/// default one, say) cannot be captured: the result is then an object {"error": "..."}.
inline nlohmann::json launched_kernels(const std::function<void(cudaStream_t)>& work) {
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  std::string error;
  try {
    work(stream);
  } catch (const std::exception& e) {
    error = e.what();
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  (void)cudaGetLastError();  // a failed capture leaves its error behind; it is reported below
  CUDA_CHECK(cudaStreamDestroy(stream));
  if (ended != cudaSuccess || graph == nullptr || !error.empty()) {
    if (graph != nullptr) CUDA_CHECK(cudaGraphDestroy(graph));
    return {{"error", !error.empty() ? "the launch threw: " + error
                                     : std::string("the launches could not be captured (") + cudaGetErrorName(ended) +
                                           "): does every launch use the stream it is given?"}};
  }
  nlohmann::json kernels = nlohmann::json::array();
  std::size_t count = 0;
  CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type != cudaGraphNodeTypeKernel) continue;
    cudaKernelNodeParams p{};
    CUDA_CHECK(cudaGraphKernelNodeGetParams(node, &p));
    const int threads = static_cast<int>(p.blockDim.x * p.blockDim.y * p.blockDim.z);
    nlohmann::json k = kernel_fields(p.func, threads, p.sharedMemBytes);
    const char* name = nullptr;
    std::string readable = cudaFuncGetName(&name, p.func) == cudaSuccess && name ? name : "?";
    int status = 0;
    if (char* d = abi::__cxa_demangle(readable.c_str(), nullptr, nullptr, &status); d != nullptr) {
      readable = d;
      std::free(d);
    }
    k["name"] = kernel_display_name(readable);
    k["grid"] = {p.gridDim.x, p.gridDim.y, p.gridDim.z};
    k["block"] = {p.blockDim.x, p.blockDim.y, p.blockDim.z};
    kernels.push_back(k);
  }
  CUDA_CHECK(cudaGraphDestroy(graph));
  return kernels;
}

}  // namespace gpulab::testing
