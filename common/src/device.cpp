/// @file device.cpp
/// @brief Device probe and attribute queries.
#include "gpulab/device.hpp"

#include "gpulab/check.hpp"

namespace gpulab {

DeviceProbe probe_devices() noexcept {
  DeviceProbe probe;
  probe.error = cudaGetDeviceCount(&probe.count);
  if (probe.error == cudaSuccess && probe.count > 0) {
    probe.available = true;
    return probe;
  }
  probe.count = 0;
  switch (probe.error) {
    case cudaErrorInsufficientDriver:
      probe.reason = "no NVIDIA driver (or one too old for this CUDA runtime)";
      break;
    case cudaErrorNoDevice:
      probe.reason = "no CUDA-capable device";
      break;
    case cudaSuccess:
      probe.reason = "no CUDA-capable device";
      break;
    default:
      probe.reason = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(probe.error);
  }
  cudaGetLastError();  // clear the error so that it does not leak into a later check
  return probe;
}

DeviceInfo query_device(int ordinal) {
  if (ordinal < 0) CUDA_CHECK(cudaGetDevice(&ordinal));
  DeviceInfo d;
  d.ordinal = ordinal;
  auto attr = [ordinal](cudaDeviceAttr a) {
    int v = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&v, a, ordinal));
    return v;
  };
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  d.name = prop.name;
  d.global_memory_bytes = prop.totalGlobalMem;
  d.cc_major = attr(cudaDevAttrComputeCapabilityMajor);
  d.cc_minor = attr(cudaDevAttrComputeCapabilityMinor);
  d.sm_count = attr(cudaDevAttrMultiProcessorCount);
  d.warp_size = attr(cudaDevAttrWarpSize);
  d.max_threads_per_block = attr(cudaDevAttrMaxThreadsPerBlock);
  d.max_threads_per_sm = attr(cudaDevAttrMaxThreadsPerMultiProcessor);
  d.max_grid_x = attr(cudaDevAttrMaxGridDimX);
  d.max_grid_y = attr(cudaDevAttrMaxGridDimY);
  d.max_grid_z = attr(cudaDevAttrMaxGridDimZ);
  d.l2_bytes = static_cast<std::size_t>(attr(cudaDevAttrL2CacheSize));
  d.shared_per_block_optin = static_cast<std::size_t>(attr(cudaDevAttrMaxSharedMemoryPerBlockOptin));
  d.shared_per_sm = static_cast<std::size_t>(attr(cudaDevAttrMaxSharedMemoryPerMultiprocessor));
  d.regs_per_sm = attr(cudaDevAttrMaxRegistersPerMultiprocessor);
  d.clock_khz = attr(cudaDevAttrClockRate);
  d.memory_clock_khz = attr(cudaDevAttrMemoryClockRate);
  d.memory_bus_bits = attr(cudaDevAttrGlobalMemoryBusWidth);
  return d;
}

MemoryInfo device_memory() {
  MemoryInfo m;
  CUDA_CHECK(cudaMemGetInfo(&m.free_bytes, &m.total_bytes));
  return m;
}

}  // namespace gpulab
