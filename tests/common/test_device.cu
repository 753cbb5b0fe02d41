/// @file test_device.cpp
/// @brief Device probe (runs everywhere), DeviceBuffer guard bands and bench (need a GPU).
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "gpulab/bench.hpp"
#include "gpulab/check.hpp"
#include "gpulab/device.hpp"
#include "gpulab/device_buffer.hpp"
#include "gpulab/peaks.hpp"
#include "gpulab_device_test.hpp"

TEST_CASE("probe_devices never throws and explains a missing device", "[cpu]") {
  const gpulab::DeviceProbe p = gpulab::probe_devices();
  if (p.available) {
    CHECK(p.count > 0);
    CHECK(p.reason.empty());
  } else {
    CHECK(p.count == 0);
    CHECK_FALSE(p.reason.empty());
    // No driver, no device, or a driver that reports zero devices: nothing else means "no GPU".
    CHECK((p.error == cudaErrorNoDevice || p.error == cudaErrorInsufficientDriver || p.error == cudaSuccess));
  }
}

TEST_CASE("CUDA_CHECK throws with the call text and the error name", "[cpu]") {
  try {
    CUDA_CHECK(cudaErrorInvalidValue);
    FAIL("did not throw");
  } catch (const gpulab::CudaError& e) {
    CHECK(e.code() == cudaErrorInvalidValue);
    CHECK_THAT(e.what(), Catch::Contains("cudaErrorInvalidValue") && Catch::Contains("test_device.cu"));
  }
  CHECK(gpulab::is_sticky(cudaErrorIllegalAddress));
  CHECK_FALSE(gpulab::is_sticky(cudaErrorInvalidValue));
}

__global__ void write_at(float* p, long long index) { p[index] = 1.0f; }

namespace {
void launch_write(float* p, long long index) {
  void* args[] = {&p, &index};
  CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(&write_at), dim3(1), dim3(1), args, 0, nullptr));
  CUDA_CHECK(cudaDeviceSynchronize());
}
}  // namespace

TEST_CASE("guard bands catch a write one past the end and one before the start", "[gpu]") {
  gpulab::DeviceBuffer<float> in_bounds(100), past(100), before(100), empty(0);
  launch_write(in_bounds.data(), 99);
  CHECK(in_bounds.check_guards().intact);
  launch_write(past.data(), 100);
  const gpulab::GuardReport p = past.check_guards();
  CHECK_FALSE(p.intact);
  CHECK_FALSE(p.front);
  CHECK(p.byte_offset < 4);
  launch_write(before.data(), -1);
  const gpulab::GuardReport b = before.check_guards();
  CHECK_FALSE(b.intact);
  CHECK(b.front);
  launch_write(empty.data(), 0);  // n = 0: any write is out of bounds
  CHECK_FALSE(empty.check_guards().intact);
}

TEST_CASE("DeviceBuffer round-trips data and moves ownership", "[gpu]") {
  const std::vector<float> host = {1, 2, 3, 4, 5};
  gpulab::DeviceBuffer<float> a(host);
  CHECK(a.download() == host);
  CHECK(reinterpret_cast<std::uintptr_t>(a.data()) % 256 == 0);
  gpulab::DeviceBuffer<float> b = std::move(a);
  CHECK(a.size() == 0);
  CHECK(b.download() == host);
}

TEST_CASE("bench times GPU work with events and a median", "[gpu]") {
  gpulab::DeviceBuffer<char> src(64 << 20), dst(64 << 20);
  gpulab::BenchOptions o;
  o.warmup_ms = 20;
  o.min_samples = 5;
  o.max_samples = 5;
  const gpulab::BenchResult r = gpulab::bench(
      [&](cudaStream_t s) { CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.bytes(), cudaMemcpyDeviceToDevice, s)); }, o);
  CHECK(r.samples_ms.size() == 5);
  CHECK(r.median_ms > 0.0);
  CHECK(r.min_ms <= r.median_ms);
  CHECK(r.median_ms <= r.max_ms);
  // 128 MiB moved (read + write) cannot take less than 10 µs on any GPU (> 13 TB/s).
  CHECK(r.min_ms > 0.01);
  CHECK(gpulab::measure_d2d_memcpy_gbs(64 << 20, o) > 1.0);
}

TEST_CASE("read_gpu_state never throws and says when NVML is not there", "[cpu]") {
  const gpulab::GpuState s = gpulab::read_gpu_state();
  if (!gpulab::probe_devices().available) {
    CHECK_FALSE(s.available);  // no driver, no NVML: nothing to report, and nothing invented
    CHECK(s.sm_clock_mhz == 0);
  } else if (s.available) {
    CHECK(s.sm_clock_mhz > 0);
  }
}

TEST_CASE("device peaks are measured once then read from the cache", "[gpu]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "gpulab-peaks-gpu-test";
  std::filesystem::remove_all(dir);
  ::setenv("GPULAB_CACHE_DIR", dir.c_str(), 1);
  ::unsetenv("GPULAB_REMEASURE_PEAKS");
  const gpulab::DevicePeaks first = gpulab::measured_peaks();
  const gpulab::DevicePeaks second = gpulab::measured_peaks();
  ::unsetenv("GPULAB_CACHE_DIR");
  std::filesystem::remove_all(dir);
  CHECK_FALSE(first.from_cache);
  CHECK(second.from_cache);
  CHECK(second.fma_gflops == first.fma_gflops);
  CHECK(first.uuid.rfind("GPU-", 0) == 0);
  // Physical sanity: the FMA kernel reaches at least half the fp32 rate the device's attributes
  // imply (clock × lanes × 2), and cannot beat it by more than boost-clock slack.
  const double attr_peak = gpulab::query_device().fp32_peak_gflops();
  INFO("measured " << first.fma_gflops << " GFLOP/s, from attributes " << attr_peak << " GFLOP/s; copy " << first.copy_gbs << " GB/s");
  CHECK(first.fma_gflops >= 0.5 * attr_peak);
  CHECK(first.fma_gflops <= 1.25 * attr_peak);
  CHECK(first.copy_gbs > 0.0);
}

namespace {
__global__ void staged_copy_kernel(const float* in, float* out, int n) {
  __shared__ float stage[128];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  stage[threadIdx.x] = i < n ? in[i] : 0.0f;
  __syncthreads();
  if (i < n) out[i] = stage[blockDim.x - 1 - threadIdx.x];
}
}  // namespace

TEST_CASE("launched kernels are found by capture with their attributes and occupancy", "[gpu]") {
  gpulab::DeviceBuffer<float> in(1000), out(1000);
  const nlohmann::json k = gpulab::testing::launched_kernels([&](cudaStream_t s) {
    staged_copy_kernel<<<8, 128, 0, s>>>(in.data(), out.data(), 1000);
    CUDA_CHECK_LAUNCH();
  });
  INFO(k.dump());
  REQUIRE(k.is_array());
  REQUIRE(k.size() == 1);
  CHECK(k[0]["name"].get<std::string>().find("staged_copy_kernel") != std::string::npos);
  CHECK(k[0]["block"] == nlohmann::json::array({128, 1, 1}));
  CHECK(k[0]["grid"] == nlohmann::json::array({8, 1, 1}));
  CHECK(k[0]["static_smem_bytes"] == 512);
  CHECK(k[0]["registers"].get<int>() > 0);
  const double occupancy = k[0]["occupancy"].get<double>();
  CHECK(occupancy > 0.0);
  CHECK(occupancy <= 1.0);
  // Nothing ran: out is still as allocated (guard bands intact, no kernel wrote it).
  CHECK(out.check_guards().intact);
  // Work that throws is reported, not propagated.
  const nlohmann::json failed = gpulab::testing::launched_kernels([](cudaStream_t) { throw std::runtime_error("no launch"); });
  REQUIRE(failed.is_object());
  CHECK(failed.value("error", std::string()) == "the launch threw: no launch");
}

TEST_CASE("the GPU state across a timed loop keeps the lower clock and the limited time in between", "[cpu]") {
  gpulab::GpuState before, after;
  before.available = after.available = true;
  before.sm_clock_mhz = 1980;
  after.sm_clock_mhz = 1755;
  after.temperature_c = 81;
  before.slowdowns = "power cap";
  after.slowdowns = "thermal, power cap";
  before.power_violation_ns = 5'000'000;
  after.power_violation_ns = 17'500'000;
  before.thermal_violation_ns = after.thermal_violation_ns = 0;
  const gpulab::GpuState s = gpulab::gpu_state_between(before, after);
  CHECK(s.sm_clock_mhz == 1755);
  CHECK(s.temperature_c == 81);
  CHECK(s.power_violation_ns == 12'500'000);
  CHECK(s.slowdowns == "power cap, thermal, limited 12.5 ms by power and 0.0 ms by temperature while timed");
  before.available = false;
  CHECK_FALSE(gpulab::gpu_state_between(before, after).available);
}
