/// @file nn_host.cpp
/// @brief gpulab::nn's host operations: loops, and OpenBLAS's CBLAS for the GEMM (one thread).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "nn_internal.hpp"

#ifdef GPULAB_WITH_OPENBLAS
#include <cblas.h>
#endif

namespace gpulab::nn::detail {
namespace {

bool& plain_gemm_forced() {
  static bool plain = false;
  return plain;
}

void* host_allocate(std::size_t bytes) {
  void* p = std::aligned_alloc(256, std::max<std::size_t>(256, (bytes + 255) / 256 * 256));
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

/// Element (i, j) of op(M), for M stored row-major with @p stored_cols columns.
float at(const float* m, bool transposed, std::size_t stored_cols, std::size_t i, std::size_t j) {
  return transposed ? m[j * stored_cols + i] : m[i * stored_cols + j];
}

void host_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, const float* b, float beta,
               float* c) {
#ifdef GPULAB_WITH_OPENBLAS
  if (!plain_gemm_forced()) {
    static const bool one_thread = [] {
      openblas_set_num_threads(1);  // several ranks share the cores: one thread each
      return true;
    }();
    (void)one_thread;
    // Leading dimensions are at least 1 even for an empty operand (BLAS rejects 0).
    const auto ld = [](std::size_t x) { return static_cast<int>(std::max<std::size_t>(1, x)); };
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), alpha, a, ld(ta ? m : k), b, ld(tb ? k : n), beta, c, ld(n));
    return;
  }
#endif
  plain_gemm(ta, tb, m, n, k, alpha, a, b, beta, c);
}

void host_softmax_ce(const float* logits, const int* labels, std::size_t rows, std::size_t cols, double* losses, float* dlogits) {
  for (std::size_t i = 0; i < rows; ++i) {
    const float* z = logits + i * cols;
    const float top = *std::max_element(z, z + cols);
    double sum = 0.0;
    for (std::size_t j = 0; j < cols; ++j) sum += std::exp(static_cast<double>(z[j]) - top);
    const double log_sum = std::log(sum) + top;
    losses[i] = log_sum - z[static_cast<std::size_t>(labels[i])];
    if (dlogits == nullptr) continue;
    for (std::size_t j = 0; j < cols; ++j) {
      const double p = std::exp(static_cast<double>(z[j]) - log_sum);
      dlogits[i * cols + j] = static_cast<float>((p - (static_cast<int>(j) == labels[i] ? 1.0 : 0.0)) / static_cast<double>(rows));
    }
  }
}

}  // namespace

void use_plain(bool plain) { plain_gemm_forced() = plain; }
bool plain_in_use() {
#ifdef GPULAB_WITH_OPENBLAS
  return plain_gemm_forced();
#else
  return true;
#endif
}

void plain_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, const float* b, float beta,
                float* c) {
  // The loop GEMM: i-p-j order (the inner loop runs along a row of B and of C), fp32 accumulation.
  std::vector<float> row(n);
  for (std::size_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), 0.0f);
    for (std::size_t p = 0; p < k; ++p) {
      const float aip = at(a, ta, ta ? m : k, i, p);
      for (std::size_t j = 0; j < n; ++j) row[j] += aip * at(b, tb, tb ? k : n, p, j);
    }
    for (std::size_t j = 0; j < n; ++j) c[i * n + j] = alpha * row[j] + (beta == 0.0f ? 0.0f : beta * c[i * n + j]);
  }
}

float gelu_value(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }
float gelu_slope(float x) {
  const float cdf = 0.5f * (1.0f + std::erf(x * 0.70710678118654752f));
  const float pdf = 0.39894228040143268f * std::exp(-0.5f * x * x);
  return cdf + x * pdf;
}

const Ops& host_ops() {
  static const Ops ops = {
      host_allocate,
      [](void* p) { std::free(p); },
      [](float* x, std::size_t n, float v) { std::fill(x, x + n, v); },
      [](float* d, const float* s, std::size_t n) { if (n) std::memcpy(d, s, n * sizeof(float)); },
      [](float* d, const float* s, std::size_t n) { if (n) std::memcpy(d, s, n * sizeof(float)); },
      [](float* d, const float* s, std::size_t n) { if (n && d != s) std::memmove(d, s, n * sizeof(float)); },
      host_gemm,
      [](float alpha, const float* x, float* y, std::size_t n) { for (std::size_t i = 0; i < n; ++i) y[i] += alpha * x[i]; },
      [](float* x, std::size_t n, float alpha) { for (std::size_t i = 0; i < n; ++i) x[i] *= alpha; },
      [](float* y, const float* row, std::size_t rows, std::size_t cols) {
        for (std::size_t i = 0; i < rows; ++i) for (std::size_t j = 0; j < cols; ++j) y[i * cols + j] += row[j];
      },
      [](float* out, const float* dy, std::size_t rows, std::size_t cols) {
        for (std::size_t i = 0; i < rows; ++i) for (std::size_t j = 0; j < cols; ++j) out[j] += dy[i * cols + j];
      },
      [](float* y, const float* x, std::size_t n) { for (std::size_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f; },
      [](float* dx, const float* dy, const float* x, std::size_t n) { for (std::size_t i = 0; i < n; ++i) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f; },
      [](float* y, const float* x, std::size_t n) { for (std::size_t i = 0; i < n; ++i) y[i] = gelu_value(x[i]); },
      [](float* dx, const float* dy, const float* x, std::size_t n) { for (std::size_t i = 0; i < n; ++i) dx[i] = dy[i] * gelu_slope(x[i]); },
      host_softmax_ce,
      [](float* w, const float* g, float* v, std::size_t n, float lr, float momentum, float wd) {
        for (std::size_t i = 0; i < n; ++i) {
          const float d = g[i] + wd * w[i];
          if (v != nullptr) v[i] = momentum * v[i] + d;
          w[i] -= lr * (v != nullptr ? v[i] : d);
        }
      },
      [](float* w, const float* g, float* m, float* v, std::size_t n, float lr, float b1, float b2, float eps, float wd, float c1, float c2) {
        for (std::size_t i = 0; i < n; ++i) {
          m[i] = b1 * m[i] + (1.0f - b1) * g[i];
          v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
          w[i] -= lr * ((m[i] / c1) / (std::sqrt(v[i] / c2) + eps) + wd * w[i]);
        }
      },
  };
  return ops;
}

}  // namespace gpulab::nn::detail
