/// @file peaks.cu
/// @brief The device side of peaks.hpp: the FMA-throughput kernel and the measurement.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

#include "gpulab/bench.hpp"
#include "gpulab/check.hpp"
#include "gpulab/device.hpp"
#include "gpulab/device_buffer.hpp"
#include "gpulab/peaks.hpp"

namespace gpulab {

namespace {

constexpr int kChains = 8;       // independent FMA chains per thread: enough to cover the latency
constexpr int kIterations = 8192;
constexpr int kThreads = 256;

/// kChains · kIterations dependent-per-chain FMAs per thread and nothing else. The values stay
/// bounded (|b| < 1) and the result is stored only if it equals a value it never reaches, so the
/// compiler can neither fold nor drop the work.
__global__ void fma_throughput_kernel(float* sink, float b, float c) {
  float a[kChains];
#pragma unroll
  for (int i = 0; i < kChains; ++i) a[i] = threadIdx.x * 1e-3f + i;
#pragma unroll 8
  for (int it = 0; it < kIterations; ++it) {
#pragma unroll
    for (int i = 0; i < kChains; ++i) a[i] = fmaf(a[i], b, c);
  }
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kChains; ++i) s += a[i];
  if (s == -1234.5f) sink[blockIdx.x] = s;
}

std::string uuid_text(const cudaUUID_t& u) {
  static const char* hex = "0123456789abcdef";
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    const auto byte = static_cast<unsigned char>(u.bytes[i]);
    s += hex[byte >> 4];
    s += hex[byte & 15];
    if (i == 3 || i == 5 || i == 7 || i == 9) s += '-';
  }
  return s;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return b;
}

}  // namespace

DevicePeaks measured_peaks() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  const std::string uuid = uuid_text(prop.uuid);
  const std::filesystem::path dir = peaks_cache_dir();
  const char* again = std::getenv("GPULAB_REMEASURE_PEAKS");
  if (!(again && std::string(again) == "1")) {
    if (auto cached = load_cached_peaks(dir, uuid)) return *cached;
  }

  DevicePeaks p;
  p.device = prop.name;
  p.uuid = uuid;
  p.measured_at = utc_now();
  // The copy: 1 GiB each way where memory allows (far beyond any L2), else what fits.
  const MemoryInfo mem = device_memory();
  const std::size_t bytes = std::min<std::size_t>(std::size_t{1} << 30, mem.free_bytes / 4) / 4096 * 4096;
  p.copy_gbs = measure_d2d_memcpy_gbs(bytes);
  // The FMAs: 8 blocks of 256 threads per SM, as many as the SM holds.
  const DeviceInfo info = query_device();
  const int blocks = std::max(1, info.sm_count) * 8;
  DeviceBuffer<float> sink(static_cast<std::size_t>(blocks));
  BenchOptions o;
  o.flush_l2 = false;  // no memory traffic to speak of
  const BenchResult r = bench([&](cudaStream_t s) {
    fma_throughput_kernel<<<blocks, kThreads, 0, s>>>(sink.data(), 0.999f, 1e-3f);
    CUDA_CHECK_LAUNCH();
  }, o);
  const double flops = 2.0 * kChains * kIterations * static_cast<double>(blocks) * kThreads;
  p.fma_gflops = r.median_ms > 0 ? flops / (r.median_ms * 1e6) : 0.0;
  if (!store_cached_peaks(dir, p)) {
    std::fprintf(stderr, "gpulab: could not cache the device's peaks in %s (measured again next time)\n", dir.c_str());
  }
  return p;
}

}  // namespace gpulab
