/// @file nn_internal.hpp
/// @brief Between gpulab::nn's device-independent code and its two sets of kernels: the host
/// loops (nn_host.cpp, OpenBLAS for the GEMM) and the device kernels (nn_device.cu, cuBLAS).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <string>

#include "gpulab/nn.hpp"

namespace gpulab::nn::detail {

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
