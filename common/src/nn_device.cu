/// @file nn_device.cu
/// @brief gpulab::nn's device operations: cudaMalloc, cuBLAS for the GEMM, one small kernel per
/// element-wise operation (grid-stride loops), everything on the default stream and synchronous
/// to the host (the training labs measure with the host's clock).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <stdexcept>
#include <string>
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

// ---- the GPT's kernels: one warp per row where a row is reduced, grid-stride loops elsewhere ----

constexpr unsigned kFull = 0xffffffffu;

__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}
__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

/// The warp of this thread, counted over the grid, and the number of warps in the grid.
#define GPULAB_NN_WARP_LOOP(row, rows)                                                                 \
  for (std::size_t row = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < (rows); \
       row += static_cast<std::size_t>(gridDim.x) * blockDim.x / 32)

/// Each lane runs Welford over its columns; the lanes' (n, mean, M2) are merged by Chan, Golub and
/// LeVeque's pairwise formula ("Algorithms for computing the sample variance", 1983).
__global__ void layernorm_kernel(float* y, float* mean, float* rstd, const float* x, const float* gamma, const float* beta, std::size_t rows,
                                 std::size_t cols, float eps) {
  const unsigned lane = threadIdx.x % 32;
  GPULAB_NN_WARP_LOOP(r, rows) {
    const float* xr = x + r * cols;
    float n = 0.0f, mu = 0.0f, m2 = 0.0f;
    for (std::size_t c = lane; c < cols; c += 32) {
      n += 1.0f;
      const float d = xr[c] - mu;
      mu += d / n;
      m2 += d * (xr[c] - mu);
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float n2 = __shfl_xor_sync(kFull, n, o), mu2 = __shfl_xor_sync(kFull, mu, o), m22 = __shfl_xor_sync(kFull, m2, o);
      const float total = n + n2;
      if (total > 0.0f) {
        const float d = mu2 - mu;
        m2 = m2 + m22 + d * d * n * n2 / total;
        mu = mu + d * n2 / total;
      }
      n = total;
    }
    // Chan's merge is not symmetric in its two operands: lanes end within an ulp of each other,
    // not equal. Every lane takes lane 0's, the statistics kept for backward.
    mu = __shfl_sync(kFull, mu, 0);
    m2 = __shfl_sync(kFull, m2, 0);
    const float rs = 1.0f / sqrtf(m2 / static_cast<float>(cols) + eps);  // as the host rounds it, not rsqrtf's 2 ulp
    if (lane == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
    for (std::size_t c = lane; c < cols; c += 32) y[r * cols + c] = (xr[c] - mu) * rs * gamma[c] + beta[c];
  }
}

__global__ void layernorm_dx_kernel(float* dx, const float* dy, const float* x, const float* mean, const float* rstd, const float* gamma,
                                    std::size_t rows, std::size_t cols) {
  const unsigned lane = threadIdx.x % 32;
  GPULAB_NN_WARP_LOOP(r, rows) {
    const float mu = mean[r], rs = rstd[r];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (std::size_t c = lane; c < cols; c += 32) {
      const float g = dy[r * cols + c] * gamma[c];
      sum_g += g;
      sum_gx += g * (x[r * cols + c] - mu) * rs;
    }
    const float inv_n = 1.0f / static_cast<float>(cols);
    const float mean_g = warp_sum(sum_g) * inv_n, mean_gx = warp_sum(sum_gx) * inv_n;
    for (std::size_t c = lane; c < cols; c += 32) {
      dx[r * cols + c] = rs * (dy[r * cols + c] * gamma[c] - mean_g - (x[r * cols + c] - mu) * rs * mean_gx);
    }
  }
}

/// dγ and dβ: one thread per column, the rows in order (deterministic).
__global__ void layernorm_dparams_kernel(float* dgamma, float* dbeta, const float* dy, const float* x, const float* mean, const float* rstd,
                                         std::size_t rows, std::size_t cols) {
  GPULAB_NN_LOOP(c, cols) {
    // Added into the gradient row by row, in the host's order.
    float sg = dgamma != nullptr ? dgamma[c] : 0.0f, sb = dbeta != nullptr ? dbeta[c] : 0.0f;
    for (std::size_t r = 0; r < rows; ++r) {
      sg += dy[r * cols + c] * ((x[r * cols + c] - mean[r]) * rstd[r]);
      sb += dy[r * cols + c];
    }
    if (dgamma != nullptr) dgamma[c] = sg;
    if (dbeta != nullptr) dbeta[c] = sb;
  }
}

__global__ void embed_kernel(float* x, const float* wte, const float* wpe, const int* tokens, std::size_t rows, std::size_t T, std::size_t width) {
  GPULAB_NN_LOOP(i, rows * width) {
    const std::size_t r = i / width, c = i % width;
    x[i] = wte[static_cast<std::size_t>(tokens[r]) * width + c] + wpe[(r % T) * width + c];
  }
}

/// dwpe[t][c] += Σ_b dx[b·T + t][c], b in order.
__global__ void embed_dwpe_kernel(float* dwpe, const float* dx, std::size_t rows, std::size_t T, std::size_t width) {
  GPULAB_NN_LOOP(i, T * width) {
    const std::size_t t = i / width, c = i % width;
    float s = dwpe[i];  // added row by row, in the host's order
    for (std::size_t r = t; r < rows; r += T) s += dx[r * width + c];
    dwpe[i] = s;
  }
}

/// dwte[v][c] += Σ dx[r][c] over the rows r of token v (listed in order: rows[first[v] .. first[v+1])).
__global__ void embed_dwte_kernel(float* dwte, const float* dx, const int* first, const int* rows_of, std::size_t vocab, std::size_t width) {
  GPULAB_NN_LOOP(i, vocab * width) {
    const std::size_t v = i / width, c = i % width;
    if (first[v] == first[v + 1]) continue;
    float s = dwte[i];  // added row by row, in the host's order
    for (int k = first[v]; k < first[v + 1]; ++k) s += dx[static_cast<std::size_t>(rows_of[k]) * width + c];
    dwte[i] = s;
  }
}

__global__ void heads_from_rows_kernel(float* dst, const float* src, std::size_t B, std::size_t T, std::size_t H, std::size_t hd,
                                       std::size_t src_cols, std::size_t offset) {
  GPULAB_NN_LOOP(i, B * H * T * hd) {
    const std::size_t e = i % hd, t = (i / hd) % T, h = (i / (hd * T)) % H, b = i / (hd * T * H);
    dst[i] = src[(b * T + t) * src_cols + offset + h * hd + e];
  }
}

__global__ void rows_from_heads_kernel(float* dst, const float* src, std::size_t B, std::size_t T, std::size_t H, std::size_t hd,
                                       std::size_t dst_cols, std::size_t offset) {
  GPULAB_NN_LOOP(i, B * H * T * hd) {
    const std::size_t e = i % hd, t = (i / hd) % T, h = (i / (hd * T)) % H, b = i / (hd * T * H);
    dst[(b * T + t) * dst_cols + offset + h * hd + e] = src[i];
  }
}

__global__ void causal_softmax_kernel(float* p, const float* s, std::size_t groups, std::size_t rows, std::size_t cols, std::size_t offset,
                                      float scale) {
  const unsigned lane = threadIdx.x % 32;
  GPULAB_NN_WARP_LOOP(r, groups * rows) {
    const float* sr = s + r * cols;
    float* pr = p + r * cols;
    const std::size_t limit = offset + r % rows + 1, seen = limit < cols ? limit : cols;
    float top = -INFINITY;
    for (std::size_t j = lane; j < seen; j += 32) top = fmaxf(top, sr[j]);
    top = warp_max(top);
    float sum = 0.0f;
    for (std::size_t j = lane; j < seen; j += 32) sum += expf(scale * (sr[j] - top));
    const float inv = 1.0f / warp_sum(sum);
    for (std::size_t j = lane; j < cols; j += 32) pr[j] = j < seen ? expf(scale * (sr[j] - top)) * inv : 0.0f;
  }
}

__global__ void causal_softmax_backward_kernel(float* ds, const float* dp, const float* p, std::size_t rows, std::size_t cols, float scale) {
  const unsigned lane = threadIdx.x % 32;
  GPULAB_NN_WARP_LOOP(r, rows) {
    float dot = 0.0f;
    for (std::size_t j = lane; j < cols; j += 32) dot += p[r * cols + j] * dp[r * cols + j];
    dot = warp_sum(dot);
    for (std::size_t j = lane; j < cols; j += 32) ds[r * cols + j] = scale * p[r * cols + j] * (dp[r * cols + j] - dot);
  }
}

__global__ void dropout_kernel(float* y, const float* x, std::size_t n, std::uint64_t key, std::uint64_t first, float p) {
  const float keep_scale = 1.0f / (1.0f - p);
  GPULAB_NN_LOOP(k, n) y[k] = dropout_keep(key, first + k, p) ? x[k] * keep_scale : 0.0f;
}

/// Launches a grid-stride kernel over n elements and waits (every nn op is synchronous).
#define GPULAB_NN_LAUNCH(kernel, n, ...)                          \
  do {                                                            \
    if ((n) == 0) break;                                          \
    kernel<<<blocks_for(n), kThreads>>>(__VA_ARGS__);             \
    CUDA_CHECK_LAUNCH();                                          \
    CUDA_CHECK(cudaDeviceSynchronize());                          \
  } while (0)

/// cuBLAS, opened the first time a device GEMM runs rather than linked: libcublasLt's start-up
/// alone (its static initialisers fault in hundreds of pages) cost every process that links
/// gpulab_nn about 0.3 s on a 2-core VM, GPU or not — every rank of every case of the training
/// labs on CPU ranks, every unit test.
struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched = nullptr;
};

const Cublas& cublas() {
  static const Cublas loaded = [] {
    const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    std::string why = lib == nullptr ? dlerror() : "";
#ifdef GPULAB_CUDA_LIBRARY_DIR
    if (lib == nullptr) {  // the toolkit we were built with
      lib = dlopen((std::string(GPULAB_CUDA_LIBRARY_DIR) + "/" + name).c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib == nullptr) why += "; " + std::string(dlerror());
    }
#endif
    if (lib == nullptr) throw std::runtime_error("gpulab::nn: cannot open " + name + " for the device GEMM: " + why);
    auto symbol = [&](const char* what) {
      void* f = dlsym(lib, what);
      if (f == nullptr) throw std::runtime_error("gpulab::nn: " + name + " has no " + what + ": " + dlerror());
      return f;
    };
    Cublas c;
    c.create = reinterpret_cast<decltype(c.create)>(symbol("cublasCreate_v2"));
    c.set_math_mode = reinterpret_cast<decltype(c.set_math_mode)>(symbol("cublasSetMathMode"));
    c.sgemm = reinterpret_cast<decltype(c.sgemm)>(symbol("cublasSgemm_v2"));
    c.sgemm_strided_batched = reinterpret_cast<decltype(c.sgemm_strided_batched)>(symbol("cublasSgemmStridedBatched"));
    return c;  // the library stays open for the process's life
  }();
  return loaded;
}

cublasHandle_t handle() {
  thread_local cublasHandle_t h = [] {
    cublasHandle_t created = nullptr;
    CUBLAS_CHECK(cublas().create(&created));
    CUBLAS_CHECK(cublas().set_math_mode(created, CUBLAS_DEFAULT_MATH));  // fp32 in fp32, as the host
    return created;
  }();
  return h;
}

void device_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, const float* b, float beta,
                 float* c) {
  // Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: B first, with the same flags.
  // Leading dimensions are at least 1 even for an empty operand (BLAS rejects 0).
  const auto ld = [](std::size_t x) { return static_cast<int>(std::max<std::size_t>(1, x)); };
  CUBLAS_CHECK(cublas().sgemm(handle(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
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

void device_gemm_batched(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, std::size_t sa,
                         const float* b, std::size_t sb, float beta, float* c, std::size_t sc, std::size_t count) {
  if (count == 0) return;
  const auto ld = [](std::size_t x) { return static_cast<int>(std::max<std::size_t>(1, x)); };
  CUBLAS_CHECK(cublas().sgemm_strided_batched(handle(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                                         static_cast<int>(m), static_cast<int>(k), &alpha, b, ld(tb ? k : n), static_cast<long long>(sb), a,
                                         ld(ta ? m : k), static_cast<long long>(sa), &beta, c, ld(n), static_cast<long long>(sc),
                                         static_cast<int>(count)));
  CUDA_CHECK(cudaDeviceSynchronize());
}

/// Enough blocks of kThreads for one warp per row.
unsigned warp_blocks_for(std::size_t rows) { return blocks_for(rows * 32); }

/// Launches a one-warp-per-row kernel and waits.
#define GPULAB_NN_LAUNCH_ROWS(kernel, rows, ...)                  \
  do {                                                            \
    if ((rows) == 0) break;                                       \
    kernel<<<warp_blocks_for(rows), kThreads>>>(__VA_ARGS__);     \
    CUDA_CHECK_LAUNCH();                                          \
    CUDA_CHECK(cudaDeviceSynchronize());                          \
  } while (0)

void device_layernorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x, const float* mean, const float* rstd,
                               const float* gamma, std::size_t rows, std::size_t cols) {
  GPULAB_NN_LAUNCH_ROWS(layernorm_dx_kernel, rows, dx, dy, x, mean, rstd, gamma, rows, cols);
  if (dgamma != nullptr || dbeta != nullptr) GPULAB_NN_LAUNCH(layernorm_dparams_kernel, cols, dgamma, dbeta, dy, x, mean, rstd, rows, cols);
}

void device_embed(float* x, const float* wte, const float* wpe, const int* tokens, std::size_t rows, std::size_t T, std::size_t width) {
  if (rows == 0) return;
  Scratch dtokens(rows, sizeof(int));
  CUDA_CHECK(cudaMemcpy(dtokens.pointer, tokens, rows * sizeof(int), cudaMemcpyHostToDevice));
  GPULAB_NN_LAUNCH(embed_kernel, rows * width, x, wte, wpe, static_cast<const int*>(dtokens.pointer), rows, T, width);
}

void device_embed_backward(float* dwte, float* dwpe, const float* dx, const int* tokens, std::size_t rows, std::size_t T, std::size_t width,
                           std::size_t vocab) {
  if (rows == 0) return;
  if (dwpe != nullptr) GPULAB_NN_LAUNCH(embed_dwpe_kernel, T * width, dwpe, dx, rows, T, width);
  if (dwte == nullptr) return;
  // The rows of each token, in order (a counting sort on the host): each table row is then summed
  // by one thread in a fixed order, with no atomics.
  std::vector<int> first(vocab + 1, 0), rows_of(rows);
  for (std::size_t r = 0; r < rows; ++r) ++first[static_cast<std::size_t>(tokens[r]) + 1];
  for (std::size_t v = 0; v < vocab; ++v) first[v + 1] += first[v];
  std::vector<int> next(first.begin(), first.end() - 1);
  for (std::size_t r = 0; r < rows; ++r) rows_of[static_cast<std::size_t>(next[static_cast<std::size_t>(tokens[r])]++)] = static_cast<int>(r);
  Scratch dfirst(vocab + 1, sizeof(int)), drows(rows, sizeof(int));
  CUDA_CHECK(cudaMemcpy(dfirst.pointer, first.data(), first.size() * sizeof(int), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(drows.pointer, rows_of.data(), rows * sizeof(int), cudaMemcpyHostToDevice));
  GPULAB_NN_LAUNCH(embed_dwte_kernel, vocab * width, dwte, dx, static_cast<const int*>(dfirst.pointer), static_cast<const int*>(drows.pointer),
                   vocab, width);
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
      device_gemm_batched,
      [](float* y, float* mean, float* rstd, const float* x, const float* gamma, const float* beta, std::size_t rows, std::size_t cols, float eps) {
        GPULAB_NN_LAUNCH_ROWS(layernorm_kernel, rows, y, mean, rstd, x, gamma, beta, rows, cols, eps);
      },
      device_layernorm_backward,
      device_embed,
      device_embed_backward,
      [](float* dst, const float* src, std::size_t B, std::size_t T, std::size_t H, std::size_t hd, std::size_t cols, std::size_t offset) {
        GPULAB_NN_LAUNCH(heads_from_rows_kernel, B * H * T * hd, dst, src, B, T, H, hd, cols, offset);
      },
      [](float* dst, const float* src, std::size_t B, std::size_t T, std::size_t H, std::size_t hd, std::size_t cols, std::size_t offset) {
        GPULAB_NN_LAUNCH(rows_from_heads_kernel, B * H * T * hd, dst, src, B, T, H, hd, cols, offset);
      },
      [](float* p, const float* s, std::size_t groups, std::size_t rows, std::size_t cols, std::size_t offset, float scale) {
        GPULAB_NN_LAUNCH_ROWS(causal_softmax_kernel, groups * rows, p, s, groups, rows, cols, offset, scale);
      },
      [](float* ds, const float* dp, const float* p, std::size_t rows, std::size_t cols, float scale) {
        GPULAB_NN_LAUNCH_ROWS(causal_softmax_backward_kernel, rows, ds, dp, p, rows, cols, scale);
      },
      [](float* y, const float* x, std::size_t n, std::uint64_t key, std::uint64_t first, float p) {
        GPULAB_NN_LAUNCH(dropout_kernel, n, y, x, n, key, first, p);
      },
  };
  return ops;
}

}  // namespace gpulab::nn::detail
