/// @file hello.hpp
/// @brief Lab 01 — hello kernel: the functions you implement in labs/01-hello-kernel/hello.cu.
///
/// This header belongs to the tests: do not change it. Device pointers are plain `float*` into
/// device memory (the tests own the memory); `n` and image sizes may be as small as 0 or 1 and
/// larger than the number of threads one launch can have.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lab01 {

/// A 1D launch: `blocks` blocks of `threads` threads. blocks == 0 means "launch nothing".
struct Launch1D {
  std::uint32_t blocks = 0;
  std::uint32_t threads = 0;
};

/// A 2D launch for a width × height grid of work items (x along the width).
struct Launch2D {
  dim3 blocks{0, 0, 0};
  dim3 threads{0, 0, 0};
};

/// The largest gridDim.x: 2³¹ − 1 on every GPU CUDA 13 supports.
inline constexpr std::int64_t kMaxGridX = 2147483647;
/// The largest gridDim.y and gridDim.z: 65535.
inline constexpr std::int64_t kMaxGridYZ = 65535;

/// TODO(01.1): blocks of `threads_per_block` threads covering n elements, at most `max_blocks`
/// blocks (and never more than kMaxGridX). Throws std::invalid_argument when n < 0,
/// max_blocks < 1, or threads_per_block is not a multiple of 32 in [32, 1024].
Launch1D launch_config_1d(std::int64_t n, int threads_per_block, std::int64_t max_blocks);

/// TODO(01.2): a grid of `threads`-shaped blocks covering width × height. Throws
/// std::invalid_argument for negative sizes, a block of 0 or more than 1024 threads, or a grid
/// that exceeds the limits (kMaxGridX in x, kMaxGridYZ in y).
Launch2D launch_config_2d(std::int64_t width, std::int64_t height, dim3 threads);

/// TODO(01.3, 01.4): c[i] = a[i] + b[i] for 0 ≤ i < n, asynchronously on `stream`.
void vector_add(const float* a, const float* b, float* c, std::int64_t n, cudaStream_t stream = 0);

/// TODO(01.5): z[i] = alpha·x[i] + y[i] for 0 ≤ i < n, with at most `max_blocks` blocks
/// (0: the launcher's choice), so each thread may have many elements to do.
void saxpy(float alpha, const float* x, const float* y, float* z, std::int64_t n,
           std::int64_t max_blocks = 0, cudaStream_t stream = 0);

/// TODO(01.6): grey[y·width + x] = 0.299·R + 0.587·G + 0.114·B (ITU-R BT.601 luma) for an image
/// stored row by row as interleaved floats R, G, B (3 per pixel).
void rgb_to_grey(const float* rgb, float* grey, int width, int height, cudaStream_t stream = 0);

/// The luma weights, exactly as the kernel must use them (as floats).
inline constexpr float kLumaR = 0.299f, kLumaG = 0.587f, kLumaB = 0.114f;

/// TODO(01.7): the time in milliseconds that one vector_add of n elements takes on the GPU,
/// measured with CUDA events on the default stream.
float time_vector_add_ms(const float* a, const float* b, float* c, std::int64_t n);

}  // namespace lab01
