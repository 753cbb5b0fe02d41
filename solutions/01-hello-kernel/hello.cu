/// @file hello.cu
/// @brief Lab 01 — hello kernel: launch configuration, vector add, SAXPY with a grid-stride loop,
/// RGB → grey in 2D, and timing with CUDA events. Read lessons/01-hello-kernel.md first.
///
/// Napkin math for the streaming kernels here: vector add and SAXPY read 2 floats and write 1 per
/// element, 12 bytes and 1–2 FLOPs, so ≈ 0.1 FLOP/byte: far below any GPU's ridge point, so their
/// speed is set by memory bandwidth alone. The grader compares them with a device-to-device
/// cudaMemcpy on the same GPU.
#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "gpulab/check.hpp"
#include "hello.hpp"

namespace lab01 {

// ---------------------------------------------------------------------------------------------
// Launch configuration (host code)
// ---------------------------------------------------------------------------------------------

Launch1D launch_config_1d(std::int64_t n, int threads_per_block, std::int64_t max_blocks) {
  // BEGIN SOLUTION(01.1) Compute a 1D launch configuration: validate, round up, cap
  if (n < 0) throw std::invalid_argument("launch_config_1d: n must be >= 0");
  if (max_blocks < 1) throw std::invalid_argument("launch_config_1d: max_blocks must be >= 1");
  if (threads_per_block < 32 || threads_per_block > 1024 || threads_per_block % 32 != 0) {
    throw std::invalid_argument(
        "launch_config_1d: threads_per_block must be a multiple of 32 in [32, 1024]");
  }
  // ⌈n / t⌉ without forming n + t − 1, which overflows for n near INT64_MAX.
  const std::int64_t t = threads_per_block;
  const std::int64_t needed = n / t + (n % t != 0 ? 1 : 0);
  const std::int64_t blocks = std::min({needed, max_blocks, kMaxGridX});
  return {static_cast<std::uint32_t>(blocks), static_cast<std::uint32_t>(threads_per_block)};
  // STUB: return {};
  // END SOLUTION
}

Launch2D launch_config_2d(std::int64_t width, std::int64_t height, dim3 threads) {
  // BEGIN SOLUTION(01.2) Compute a 2D launch configuration for a width × height image
  if (width < 0 || height < 0) throw std::invalid_argument("launch_config_2d: negative size");
  const std::int64_t per_block = std::int64_t{threads.x} * threads.y * threads.z;
  if (per_block < 1 || per_block > 1024) {
    throw std::invalid_argument("launch_config_2d: a block holds 1 to 1024 threads");
  }
  const auto ceil_div = [](std::int64_t a, std::int64_t b) { return a / b + (a % b != 0 ? 1 : 0); };
  const std::int64_t bx = ceil_div(width, threads.x);
  const std::int64_t by = ceil_div(height, threads.y);
  if (bx > kMaxGridX || by > kMaxGridYZ) {
    throw std::invalid_argument("launch_config_2d: the image needs more blocks than a grid holds");
  }
  return {dim3(static_cast<unsigned>(bx), static_cast<unsigned>(by), 1), threads};
  // STUB: return {};
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------------

__global__ void vector_add_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                  float* __restrict__ c, std::int64_t n) {
  // BEGIN SOLUTION(01.3) Write the vector add kernel: one thread per element, 64-bit index, bounds test
  // blockIdx.x * blockDim.x is computed in 32-bit unsigned arithmetic and wraps past 2³² − 1:
  // widen before multiplying.
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
  // END SOLUTION
}

__global__ void saxpy_kernel(float alpha, const float* __restrict__ x, const float* __restrict__ y,
                             float* __restrict__ z, std::int64_t n) {
  // BEGIN SOLUTION(01.5) Write SAXPY with a grid-stride loop: thread t does elements t, t + stride, ...
  const std::int64_t start = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  // The plain loop is all the lab asks for:
  //     for (i = start; i < n; i += stride) z[i] = alpha * x[i] + y[i];
  // The reference moves 16 bytes per load when all three arrays are 16-byte aligned (float4),
  // which issues a quarter of the memory instructions; the scalar loop does the rest.
  std::int64_t scalar_from = 0;
  const auto address_bits = reinterpret_cast<std::uintptr_t>(x) |
                            reinterpret_cast<std::uintptr_t>(y) |
                            reinterpret_cast<std::uintptr_t>(z);
  if (address_bits % alignof(float4) == 0) {
    const std::int64_t n4 = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const float4* y4 = reinterpret_cast<const float4*>(y);
    float4* z4 = reinterpret_cast<float4*>(z);
    for (std::int64_t i = start; i < n4; i += stride) {
      const float4 xv = x4[i];
      const float4 yv = y4[i];
      z4[i] = make_float4(alpha * xv.x + yv.x, alpha * xv.y + yv.y, alpha * xv.z + yv.z,
                          alpha * xv.w + yv.w);
    }
    scalar_from = 4 * n4;
  }
  for (std::int64_t i = scalar_from + start; i < n; i += stride) z[i] = alpha * x[i] + y[i];
  // END SOLUTION
}

__global__ void rgb_to_grey_kernel(const float* __restrict__ rgb, float* __restrict__ grey,
                                   int width, int height) {
  // BEGIN SOLUTION(01.6) Write the RGB → grey kernel: one thread per pixel, 2D indices, both bounds
  const std::int64_t x = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t y = static_cast<std::int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;
  if (x < width && y < height) {
    const std::int64_t pixel = y * width + x;  // row-major: rows of `width` pixels
    const float* p = rgb + 3 * pixel;          // interleaved R, G, B
    grey[pixel] = kLumaR * p[0] + kLumaG * p[1] + kLumaB * p[2];
  }
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// Launchers (host code)
// ---------------------------------------------------------------------------------------------

// BEGIN SOLUTION(01.4) Launch vector_add_kernel over all n elements and check the launch
// Reference fast path: when the three pointers are 16-byte aligned, one thread adds a float4
// (a 128-bit load per array), which reaches ~97 % of cudaMemcpy bandwidth on an H200 against
// ~81 % for one float per thread; vector_add_kernel then does the last n mod 4 elements.
__global__ void vector_add_float4_kernel(const float4* __restrict__ a, const float4* __restrict__ b,
                                         float4* __restrict__ c, std::int64_t n4) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n4) {
    const float4 x = a[i];
    const float4 y = b[i];
    c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

void vector_add(const float* a, const float* b, float* c, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;  // a launch of 0 blocks is an error, not a no-op
  constexpr int kThreads = 256;
  std::int64_t done = 0;
  const auto address_bits = reinterpret_cast<std::uintptr_t>(a) |
                            reinterpret_cast<std::uintptr_t>(b) |
                            reinterpret_cast<std::uintptr_t>(c);
  if (address_bits % alignof(float4) == 0 && n >= 4) {
    const std::int64_t n4 = n / 4;
    const Launch1D cfg = launch_config_1d(n4, kThreads, kMaxGridX);
    vector_add_float4_kernel<<<cfg.blocks, cfg.threads, 0, stream>>>(
        reinterpret_cast<const float4*>(a), reinterpret_cast<const float4*>(b),
        reinterpret_cast<float4*>(c), n4);
    CUDA_CHECK_LAUNCH();
    done = 4 * n4;
  }
  if (done < n) {
    const Launch1D cfg = launch_config_1d(n - done, kThreads, kMaxGridX);
    vector_add_kernel<<<cfg.blocks, cfg.threads, 0, stream>>>(a + done, b + done, c + done,
                                                              n - done);
    CUDA_CHECK_LAUNCH();
  }
}
// STUB: void vector_add(const float* a, const float* b, float* c, std::int64_t n, cudaStream_t stream) {}
// END SOLUTION

void saxpy(float alpha, const float* x, const float* y, float* z, std::int64_t n,
           std::int64_t max_blocks, cudaStream_t stream) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  if (max_blocks <= 0) {
    // Enough blocks to fill every SM once, as many as fit on each (the occupancy API: it counts
    // this kernel's registers and the GPU's limits, e.g. 2048 threads per SM on an H200, 1536 on
    // an RTX 4090, 1024 on Turing); the grid-stride loop covers the rest of n.
    int device = 0, sms = 0, per_sm = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, saxpy_kernel, kThreads, 0));
    max_blocks = static_cast<std::int64_t>(std::max(per_sm, 1)) * sms;
  }
  const Launch1D cfg = launch_config_1d(n, kThreads, max_blocks);
  saxpy_kernel<<<cfg.blocks, cfg.threads, 0, stream>>>(alpha, x, y, z, n);
  CUDA_CHECK_LAUNCH();
}

void rgb_to_grey(const float* rgb, float* grey, int width, int height, cudaStream_t stream) {
  const Launch2D cfg = launch_config_2d(width, height, dim3(32, 8));
  if (cfg.blocks.x == 0 || cfg.blocks.y == 0) return;  // an empty image: nothing to launch
  rgb_to_grey_kernel<<<cfg.blocks, cfg.threads, 0, stream>>>(rgb, grey, width, height);
  CUDA_CHECK_LAUNCH();
}

float time_vector_add_ms(const float* a, const float* b, float* c, std::int64_t n) {
  // BEGIN SOLUTION(01.7) Time one vector_add with CUDA events
  // Events are timestamps the GPU writes when the stream reaches them; the host must wait for
  // the second one before reading the difference (a host clock would time only the launch).
  cudaEvent_t start = nullptr, stop = nullptr;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  CUDA_CHECK(cudaEventRecord(start, 0));
  vector_add(a, b, c, n, 0);
  CUDA_CHECK(cudaEventRecord(stop, 0));
  CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  return ms;
  // STUB: return 0.0f;
  // END SOLUTION
}

}  // namespace lab01
