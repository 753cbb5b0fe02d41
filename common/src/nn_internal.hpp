/// @file nn_internal.hpp
/// @brief Between gpulab::nn's device-independent code and its two sets of kernels: the host
/// loops (nn_host.cpp, OpenBLAS for the GEMM) and the device kernels (nn_device.cu, cuBLAS).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <string>

#include "gpulab/nn.hpp"

#ifdef __CUDACC__
#define GPULAB_NN_HD __host__ __device__
#else
#define GPULAB_NN_HD
#endif

namespace gpulab::nn::detail {

// ---------------------------------------------------------------------------------------------
// Dropout's mask, one function for the host loops and the kernels (see DropoutStream)
// ---------------------------------------------------------------------------------------------

constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ull;  ///< SplitMix64's increment, 2⁶⁴/φ

/// SplitMix64's output function (Steele, Lea and Flood 2014).
GPULAB_NN_HD inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// A mask's key: (seed, step, tensor) mixed one after the other, each through the finaliser, so
/// that neighbouring steps or tensors give unrelated keys.
GPULAB_NN_HD inline std::uint64_t dropout_key(std::uint64_t seed, std::uint64_t step, std::uint32_t tensor) {
  std::uint64_t k = mix64(seed + kGolden);
  k = mix64(k ^ (step + kGolden));
  return mix64(k ^ (static_cast<std::uint64_t>(tensor) + kGolden));
}

/// Element @p index kept: the index-th SplitMix64 output of @p key, its top 24 bits as u in [0, 1).
GPULAB_NN_HD inline bool dropout_keep(std::uint64_t key, std::uint64_t index, float p) {
  const std::uint64_t bits = mix64(key + (index + 1) * kGolden);
  const float u = static_cast<float>(bits >> 40) * 5.9604644775390625e-8f;  // 2⁻²⁴
  return u >= p;
}

/// Standard normal values × @p stddev from a 64-bit Mersenne twister by Box–Muller: the same on
/// every platform (std::normal_distribution is not specified bit for bit).
std::vector<float> normal(std::size_t n, float stddev, std::uint64_t seed);

/// One set of primitive operations on raw fp32 buffers of one device.
struct Ops {
  void* (*allocate)(std::size_t bytes);
  void (*release)(void* p);
  void (*fill)(float* x, std::size_t n, float value);
  void (*copy_in)(float* dst, const float* host_src, std::size_t n);   ///< from host memory
  void (*copy_out)(float* host_dst, const float* src, std::size_t n);  ///< to host memory
  void (*copy)(float* dst, const float* src, std::size_t n);           ///< same device
  /// Row-major C (m × n) = alpha · op(A) · op(B) + beta · C, op(A) m × k, op(B) k × n.
  void (*gemm)(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, const float* b, float beta,
               float* c);
  void (*axpy)(float alpha, const float* x, float* y, std::size_t n);
  void (*scale)(float* x, std::size_t n, float alpha);
  void (*add_row)(float* y, const float* row, std::size_t rows, std::size_t cols);  ///< y[i][j] += row[j]
  void (*sum_rows)(float* out, const float* dy, std::size_t rows, std::size_t cols); ///< out[j] += Σ_i dy[i][j]
  void (*relu)(float* y, const float* x, std::size_t n);
  void (*relu_backward)(float* dx, const float* dy, const float* x, std::size_t n);
  void (*gelu)(float* y, const float* x, std::size_t n);
  void (*gelu_backward)(float* dx, const float* dy, const float* x, std::size_t n);
  /// Per-row losses into @p losses (host memory, rows of them) and, when dlogits is not null,
  /// (softmax − one-hot) / rows. labels are in host memory.
  void (*softmax_ce)(const float* logits, const int* labels, std::size_t rows, std::size_t cols, double* losses, float* dlogits);
  void (*sgd)(float* w, const float* g, float* v, std::size_t n, float lr, float momentum, float weight_decay);
  void (*adamw)(float* w, const float* g, float* m, float* v, std::size_t n, float lr, float b1, float b2, float eps, float wd,
                float correction1, float correction2);

  // The GPT's operations (nn_gpt.hpp).
  /// @p count GEMMs C_i = alpha · op(A_i) · op(B_i) + beta · C_i, X_i = X + i · stride_X (floats).
  void (*gemm_batched)(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, std::size_t stride_a,
                       const float* b, std::size_t stride_b, float beta, float* c, std::size_t stride_c, std::size_t count);
  /// Each row: y = (x − mean)·rstd·γ + β, the row's mean and rstd kept (Welford).
  void (*layernorm)(float* y, float* mean, float* rstd, const float* x, const float* gamma, const float* beta, std::size_t rows,
                    std::size_t cols, float eps);
  /// dx written; dgamma, dbeta (either may be null) accumulated.
  void (*layernorm_backward)(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x, const float* mean, const float* rstd,
                             const float* gamma, std::size_t rows, std::size_t cols);
  /// x[r] = wte[tokens[r]] + wpe[r mod T]; @p tokens in host memory, checked by the caller.
  void (*embed)(float* x, const float* wte, const float* wpe, const int* tokens, std::size_t rows, std::size_t T, std::size_t width);
  /// dwte[tokens[r]] += dx[r], dwpe[r mod T] += dx[r] (either may be null), in row order for every
  /// destination row (deterministic).
  void (*embed_backward)(float* dwte, float* dwpe, const float* dx, const int* tokens, std::size_t rows, std::size_t T, std::size_t width,
                         std::size_t vocab);
  /// Heads out of rows: dst[((b·H + h)·T + t)·hd + e] = src[(b·T + t)·src_cols + offset + h·hd + e].
  void (*heads_from_rows)(float* dst, const float* src, std::size_t B, std::size_t T, std::size_t H, std::size_t hd, std::size_t src_cols,
                          std::size_t offset);
  /// The inverse: writes those columns of @p dst (dst_cols wide) from the heads in @p src.
  void (*rows_from_heads)(float* dst, const float* src, std::size_t B, std::size_t T, std::size_t H, std::size_t hd, std::size_t dst_cols,
                          std::size_t offset);
  /// Groups of @p rows rows of @p cols scores: row i sees columns j ≤ offset + i; p = softmax(scale·s)
  /// over those (max subtracted), 0 elsewhere. In place when p == s.
  void (*causal_softmax)(float* p, const float* s, std::size_t groups, std::size_t rows, std::size_t cols, std::size_t offset, float scale);
  /// ds = scale · p ⊙ (dp − Σ_j p·dp) per row (the masked entries, p = 0, get 0).
  void (*causal_softmax_backward)(float* ds, const float* dp, const float* p, std::size_t rows, std::size_t cols, float scale);
  /// y[k] = x[k] / (1 − p) where element first + k of the mask keyed @p key is kept, else 0.
  void (*dropout)(float* y, const float* x, std::size_t n, std::uint64_t key, std::uint64_t first, float p);
};

const Ops& host_ops();
/// The device's operations (cudaMalloc, kernels, cuBLAS; gpulab_nn is built only with CUDA).
const Ops& device_ops();

/// The operations of @p device's memory.
inline const Ops& ops_for(Device device) { return device == Device::kHost ? host_ops() : device_ops(); }

/// Forces the plain loop for the host GEMM (true) or lets OpenBLAS do it (false).
void use_plain(bool plain);
/// Whether the host GEMM is the plain loop now.
bool plain_in_use();
/// The plain loop GEMM (the fallback, and the baseline of the OpenBLAS benchmark).
void plain_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, const float* b, float beta,
                float* c);
/// Throws std::invalid_argument("<what>: <a's shape> and <b's shape>") unless @p a and @p b have
/// the same shape and device.
void check_like(const Tensor& a, const Tensor& b, const std::string& what);

/// GELU and its derivative, shared by the host loops and (as __device__ copies) the kernels.
float gelu_value(float x);
float gelu_slope(float x);

}  // namespace gpulab::nn::detail
