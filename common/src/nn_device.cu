/// @file nn_device.cu
/// @brief gpulab::nn's device operations: cudaMalloc, cuBLAS for the GEMM, one small kernel per
/// element-wise operation (grid-stride loops), everything on the default stream and synchronous
/// to the host (the training labs measure with the host's clock).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "gpulab/check.hpp"
#include "nn_internal.hpp"

namespace gpulab::nn::detail {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::size_t n) { return static_cast<unsigned>(std::min<std::size_t>((n + kThreads - 1) / kThreads, 4096)); }

#define GPULAB_NN_LOOP(i, n) \
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += static_cast<std::size_t>(gridDim.x) * blockDim.x)

__global__ void fill_kernel(float* x, std::size_t n, float v) { GPULAB_NN_LOOP(i, n) x[i] = v; }
__global__ void axpy_kernel(float a, const float* x, float* y, std::size_t n) { GPULAB_NN_LOOP(i, n) y[i] += a * x[i]; }
__global__ void scale_kernel(float* x, std::size_t n, float a) { GPULAB_NN_LOOP(i, n) x[i] *= a; }
__global__ void add_row_kernel(float* y, const float* row, std::size_t rows, std::size_t cols) {
  GPULAB_NN_LOOP(i, rows * cols) y[i] += row[i % cols];
}
/// out[j] += Σ_i dy[i][j]: one thread per column (the columns of a layer are few; rows loop).
__global__ void sum_rows_kernel(float* out, const float* dy, std::size_t rows, std::size_t cols) {
  GPULAB_NN_LOOP(j, cols) {
    float s = 0.0f;
    for (std::size_t i = 0; i < rows; ++i) s += dy[i * cols + j];
    out[j] += s;
  }
}
__global__ void relu_kernel(float* y, const float* x, std::size_t n) { GPULAB_NN_LOOP(i, n) y[i] = x[i] > 0.0f ? x[i] : 0.0f; }
__global__ void relu_backward_kernel(float* dx, const float* dy, const float* x, std::size_t n) {
  GPULAB_NN_LOOP(i, n) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}
__device__ float gelu_device(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
__device__ float gelu_slope_device(float x) {
  return 0.5f * (1.0f + erff(x * 0.70710678118654752f)) + x * 0.39894228040143268f * expf(-0.5f * x * x);
}
__global__ void gelu_kernel(float* y, const float* x, std::size_t n) { GPULAB_NN_LOOP(i, n) y[i] = gelu_device(x[i]); }
__global__ void gelu_backward_kernel(float* dx, const float* dy, const float* x, std::size_t n) {
  GPULAB_NN_LOOP(i, n) dx[i] = dy[i] * gelu_slope_device(x[i]);
}
/// One thread per row: the classes are few. Losses in double, as on the host.
__global__ void softmax_ce_kernel(const float* z, const int* labels, std::size_t rows, std::size_t cols, double* losses, float* dz) {
  GPULAB_NN_LOOP(r, rows) {
    const float* row = z + r * cols;
    float top = row[0];
    for (std::size_t j = 1; j < cols; ++j) top = fmaxf(top, row[j]);
    double sum = 0.0;
    for (std::size_t j = 0; j < cols; ++j) sum += exp(static_cast<double>(row[j]) - top);
    const double log_sum = log(sum) + top;
    losses[r] = log_sum - row[labels[r]];
    if (dz == nullptr) continue;
    for (std::size_t j = 0; j < cols; ++j) {
      const double p = exp(static_cast<double>(row[j]) - log_sum);
      dz[r * cols + j] = static_cast<float>((p - (static_cast<int>(j) == labels[r] ? 1.0 : 0.0)) / static_cast<double>(rows));
    }
  }
}
__global__ void sgd_kernel(float* w, const float* g, float* v, std::size_t n, float lr, float momentum, float wd) {
  GPULAB_NN_LOOP(i, n) {
    const float d = g[i] + wd * w[i];
    if (v != nullptr) v[i] = momentum * v[i] + d;
    w[i] -= lr * (v != nullptr ? v[i] : d);
  }
}
__global__ void adamw_kernel(float* w, const float* g, float* m, float* v, std::size_t n, float lr, float b1, float b2, float eps, float wd,
                             float c1, float c2) {
  GPULAB_NN_LOOP(i, n) {
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    w[i] -= lr * ((m[i] / c1) / (sqrtf(v[i] / c2) + eps) + wd * w[i]);
  }
}

/// Launches a grid-stride kernel over n elements and waits (every nn op is synchronous).
#define GPULAB_NN_LAUNCH(kernel, n, ...)                          \
  do {                                                            \
    if ((n) == 0) break;                                          \
    kernel<<<blocks_for(n), kThreads>>>(__VA_ARGS__);             \
    CUDA_CHECK_LAUNCH();                                          \
    CUDA_CHECK(cudaDeviceSynchronize());                          \
  } while (0)

cublasHandle_t handle() {
  thread_local cublasHandle_t h = [] {
    cublasHandle_t created = nullptr;
    CUBLAS_CHECK(cublasCreate(&created));
    CUBLAS_CHECK(cublasSetMathMode(created, CUBLAS_DEFAULT_MATH));  // fp32 in fp32, as the host
    return created;
  }();
  return h;
}

void device_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, const float* b, float beta,
                 float* c) {
  // Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: B first, with the same flags.
  // Leading dimensions are at least 1 even for an empty operand (BLAS rejects 0).
  const auto ld = [](std::size_t x) { return static_cast<int>(std::max<std::size_t>(1, x)); };
  CUBLAS_CHECK(cublasSgemm(handle(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                           static_cast<int>(k), &alpha, b, ld(tb ? k : n), a, ld(ta ? m : k), &beta, c, ld(n)));
  CUDA_CHECK(cudaDeviceSynchronize());
}

/// Device scratch memory from the installed allocator (so a caching allocator sees it too),
/// given back however the scope ends.
struct Scratch {
  Scratch(std::size_t n, std::size_t bytes_each) : allocator(current_allocator()), bytes(n * bytes_each) {
    pointer = allocator.allocate(bytes, Device::kGpu);
  }
  ~Scratch() { allocator.release(pointer, bytes, Device::kGpu); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  Allocator& allocator;
  std::size_t bytes;
  void* pointer = nullptr;
};

void device_softmax_ce(const float* z, const int* labels, std::size_t rows, std::size_t cols, double* losses, float* dz) {
  if (rows == 0) return;
  Scratch dlabels(rows, sizeof(int)), dlosses(rows, sizeof(double));
  CUDA_CHECK(cudaMemcpy(dlabels.pointer, labels, rows * sizeof(int), cudaMemcpyHostToDevice));
  softmax_ce_kernel<<<blocks_for(rows), kThreads>>>(z, static_cast<const int*>(dlabels.pointer), rows, cols, static_cast<double*>(dlosses.pointer), dz);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpy(losses, dlosses.pointer, rows * sizeof(double), cudaMemcpyDeviceToHost));
}

}  // namespace

const Ops& device_ops() {
  static const Ops ops = {
      [](std::size_t bytes) -> void* {
        void* p = nullptr;
        CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(bytes, 256)));
        return p;
      },
      [](void* p) { cudaFree(p); },
      [](float* x, std::size_t n, float v) { GPULAB_NN_LAUNCH(fill_kernel, n, x, n, v); },
      [](float* d, const float* s, std::size_t n) { if (n) CUDA_CHECK(cudaMemcpy(d, s, n * sizeof(float), cudaMemcpyHostToDevice)); },
      [](float* d, const float* s, std::size_t n) { if (n) CUDA_CHECK(cudaMemcpy(d, s, n * sizeof(float), cudaMemcpyDeviceToHost)); },
      [](float* d, const float* s, std::size_t n) { if (n && d != s) CUDA_CHECK(cudaMemcpy(d, s, n * sizeof(float), cudaMemcpyDeviceToDevice)); },
      device_gemm,
      [](float a, const float* x, float* y, std::size_t n) { GPULAB_NN_LAUNCH(axpy_kernel, n, a, x, y, n); },
      [](float* x, std::size_t n, float a) { GPULAB_NN_LAUNCH(scale_kernel, n, x, n, a); },
      [](float* y, const float* row, std::size_t rows, std::size_t cols) { GPULAB_NN_LAUNCH(add_row_kernel, rows * cols, y, row, rows, cols); },
      [](float* out, const float* dy, std::size_t rows, std::size_t cols) { GPULAB_NN_LAUNCH(sum_rows_kernel, cols, out, dy, rows, cols); },
      [](float* y, const float* x, std::size_t n) { GPULAB_NN_LAUNCH(relu_kernel, n, y, x, n); },
      [](float* dx, const float* dy, const float* x, std::size_t n) { GPULAB_NN_LAUNCH(relu_backward_kernel, n, dx, dy, x, n); },
      [](float* y, const float* x, std::size_t n) { GPULAB_NN_LAUNCH(gelu_kernel, n, y, x, n); },
      [](float* dx, const float* dy, const float* x, std::size_t n) { GPULAB_NN_LAUNCH(gelu_backward_kernel, n, dx, dy, x, n); },
      device_softmax_ce,
      [](float* w, const float* g, float* v, std::size_t n, float lr, float mom, float wd) { GPULAB_NN_LAUNCH(sgd_kernel, n, w, g, v, n, lr, mom, wd); },
      [](float* w, const float* g, float* m, float* v, std::size_t n, float lr, float b1, float b2, float eps, float wd, float c1, float c2) {
        GPULAB_NN_LAUNCH(adamw_kernel, n, w, g, m, v, n, lr, b1, b2, eps, wd, c1, c2);
      },
  };
  return ops;
}

}  // namespace gpulab::nn::detail
