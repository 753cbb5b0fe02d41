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
  // TODO(01.1): Compute a 1D launch configuration: validate, round up, cap
  // See lessons/01-hello-kernel.md, section "TODO(01.1)".
  return {};
}

Launch2D launch_config_2d(std::int64_t width, std::int64_t height, dim3 threads) {
  // TODO(01.2): Compute a 2D launch configuration for a width × height image
  // See lessons/01-hello-kernel.md, section "TODO(01.2)".
  return {};
}

// ---------------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------------

__global__ void vector_add_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                  float* __restrict__ c, std::int64_t n) {
  // TODO(01.3): Write the vector add kernel: one thread per element, 64-bit index, bounds test
  // See lessons/01-hello-kernel.md, section "TODO(01.3)".
}

__global__ void saxpy_kernel(float alpha, const float* __restrict__ x, const float* __restrict__ y,
                             float* __restrict__ z, std::int64_t n) {
  // TODO(01.5): Write SAXPY with a grid-stride loop: thread t does elements t, t + stride, ...
  // See lessons/01-hello-kernel.md, section "TODO(01.5)".
}

__global__ void rgb_to_grey_kernel(const float* __restrict__ rgb, float* __restrict__ grey,
                                   int width, int height) {
  // TODO(01.6): Write the RGB → grey kernel: one thread per pixel, 2D indices, both bounds
  // See lessons/01-hello-kernel.md, section "TODO(01.6)".
}

// ---------------------------------------------------------------------------------------------
// Launchers (host code)
// ---------------------------------------------------------------------------------------------

// TODO(01.4): Launch vector_add_kernel over all n elements and check the launch
// See lessons/01-hello-kernel.md, section "TODO(01.4)".
void vector_add(const float* a, const float* b, float* c, std::int64_t n, cudaStream_t stream) {}

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
  // TODO(01.7): Time one vector_add with CUDA events
  // See lessons/01-hello-kernel.md, section "TODO(01.7)".
  return 0.0f;
}

}  // namespace lab01
