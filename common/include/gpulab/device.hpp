/// @file device.hpp
/// @brief What the GPU is and whether there is one.
///
/// Figures come from cudaDeviceGetAttribute: CUDA 13 removed clockRate and memoryClockRate from
/// cudaDeviceProp, and the attribute call is also much cheaper than cudaGetDeviceProperties.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

namespace gpulab {

/// Whether CUDA devices can be used by this process. Never throws.
struct DeviceProbe {
  bool available = false;         ///< at least one usable device
  int count = 0;                  ///< number of devices
  cudaError_t error = cudaSuccess;  ///< cudaGetDeviceCount's status
  std::string reason;             ///< why not, in words, when !available
};

/// Calls cudaGetDeviceCount once. No driver gives cudaErrorInsufficientDriver (35), no device
/// cudaErrorNoDevice (100).
DeviceProbe probe_devices() noexcept;

/// The limits and figures of one device that the labs use.
struct DeviceInfo {
  int ordinal = 0;                     ///< device number
  std::string name;                    ///< e.g. "NVIDIA H200"
  int cc_major = 0;                    ///< compute capability, major (9 for Hopper)
  int cc_minor = 0;                    ///< compute capability, minor
  int sm_count = 0;                    ///< streaming multiprocessors
  int warp_size = 32;                  ///< threads per warp
  int max_threads_per_block = 0;       ///< 1024 on every current GPU
  int max_threads_per_sm = 0;          ///< resident threads per SM (2048 on Ampere and Hopper)
  long long max_grid_x = 0;            ///< largest gridDim.x
  long long max_grid_y = 0;            ///< largest gridDim.y
  long long max_grid_z = 0;            ///< largest gridDim.z
  std::size_t global_memory_bytes = 0; ///< device memory
  std::size_t l2_bytes = 0;            ///< L2 cache
  std::size_t shared_per_block_optin = 0;  ///< with cudaFuncAttributeMaxDynamicSharedMemorySize
  std::size_t shared_per_sm = 0;       ///< shared memory per SM
  int regs_per_sm = 0;                 ///< 32-bit registers per SM
  int clock_khz = 0;                   ///< SM clock (peak)
  int memory_clock_khz = 0;            ///< memory clock
  int memory_bus_bits = 0;             ///< memory bus width

  /// fp32 lanes (FMA units) per SM: 64 on Volta/Turing and A100 (7.x, 8.0), 128 on the
  /// GeForce Ampere/Ada parts (8.6, 8.9) and on Hopper and later.
  int fp32_lanes_per_sm() const { return (cc_major == 8 && cc_minor == 0) || cc_major < 8 ? 64 : 128; }
  /// Peak fp32 GFLOP/s without tensor cores: SMs × lanes × 2 (an FMA is two FLOPs) × clock.
  /// H200: 132 × 128 × 2 × 1.98 GHz ≈ 66.9 TFLOP/s.
  double fp32_peak_gflops() const { return sm_count * fp32_lanes_per_sm() * 2.0 * clock_khz / 1e6; }

  /// Peak DRAM bandwidth from the datasheet figures: 2 (double data rate) × clock × bus width.
  /// Measured bandwidth (measure_d2d_memcpy_gbs, gpulab/bench.hpp) is what thresholds use; this is for the lessons.
  double theoretical_bandwidth_gbs() const {
    return 2.0 * memory_clock_khz * 1e3 * (memory_bus_bits / 8.0) / 1e9;
  }
};

/// Queries @p ordinal (−1: the current device). Throws CudaError.
DeviceInfo query_device(int ordinal = -1);

/// The GPU's state while it was measured, from NVML (the driver's management library, loaded at
/// run time: nothing links against it, so programs still start where there is no driver).
struct GpuState {
  bool available = false;       ///< NVML answered for this device
  unsigned sm_clock_mhz = 0;    ///< current SM clock
  unsigned temperature_c = 0;   ///< GPU temperature
  std::string slowdowns;        ///< active slowdown reasons ("thermal", "power cap", ...), "" if none
  unsigned long long power_violation_ns = 0;    ///< NVML's running total of time held back by the power limit
  unsigned long long thermal_violation_ns = 0;  ///< and by the temperature limit
};

/// What happened to the GPU between two readings (before and after the timed samples): the
/// lower SM clock, the later temperature, every slowdown seen, and the time spent limited by
/// power and by temperature in between. `slowdowns` is "" when nothing held the GPU back.
GpuState gpu_state_between(const GpuState& before, const GpuState& after);

/// Reads the current device's state. Never throws; `available` is false without NVML.
GpuState read_gpu_state() noexcept;

/// Free and total device memory of the current device, in bytes.
struct MemoryInfo {
  std::size_t free_bytes = 0;   ///< free now
  std::size_t total_bytes = 0;  ///< in all
};
/// Free and total memory of the current device. Throws CudaError.
MemoryInfo device_memory();

}  // namespace gpulab
