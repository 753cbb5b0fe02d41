/// @file nn_host.cpp
/// @brief gpulab::nn's host operations: loops, and OpenBLAS's CBLAS for the GEMM (one thread).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include <malloc.h>

#include "nn_internal.hpp"

#ifdef GPULAB_WITH_OPENBLAS
#include <cblas.h>
#endif

#ifdef GPULAB_WITH_LIBMVEC
#include <immintrin.h>
// glibc's vector math library (libmvec, glibc ≥ 2.35 for erff), called by its x86-64 vector
// function ABI names: 4 lanes of SSE each, the variant picked for the CPU at load time.
extern "C" __m128 _ZGVbN4v_erff(__m128);
extern "C" __m128 _ZGVbN4v_expf(__m128);
#endif

namespace gpulab::nn::detail {
namespace {

bool& plain_gemm_forced() {
  static bool plain = false;
  return plain;
}

void* host_allocate(std::size_t bytes) {
  // A training step frees and makes the same tensors again. Left to its defaults, glibc serves
  // the large ones with fresh mmap()s (or trims the heap after them), and every step then
  // page-faults its activations in again: measured, 2.5× slower for the GPT's step. Pinning the
  // mmap threshold at its 64-bit maximum (32 MiB) and turning trimming off keeps those pages in
  // the process for the next step (mallopt(3)).
  static const bool keep_pages = [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
    return true;
  }();
  (void)keep_pages;
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

// GELU and exp over arrays, 4 at a time through libmvec where the build found it (GELU's erf and
// exp were a fifth of the GPT's step as scalar libm calls). The last n mod 4 elements go through
// the same 4-lane functions, padded: every element gets the same function wherever it sits in
// the array, so a rank that holds a slice of a tensor computes exactly its slice of the result.
#ifdef GPULAB_WITH_LIBMVEC
/// f over 4 floats at a time: full groups in place, the tail through a padded group.
template <typename F4>
void by_fours(std::size_t n, F4 f) {
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) f(i, 4);
  if (i < n) f(i, n - i);
}
__m128 load_part(const float* p, std::size_t k) {
  if (k == 4) return _mm_loadu_ps(p);
  alignas(16) float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  std::copy(p, p + k, v);
  return _mm_load_ps(v);
}
void store_part(float* p, __m128 v, std::size_t k) {
  if (k == 4) return _mm_storeu_ps(p, v);
  alignas(16) float out[4];
  _mm_store_ps(out, v);
  std::copy(out, out + k, p);
}
/// Φ(x) = ½(1 + erf(x/√2)).
__m128 cdf4(__m128 x) { return _mm_mul_ps(_mm_set1_ps(0.5f), _mm_add_ps(_mm_set1_ps(1.0f), _ZGVbN4v_erff(_mm_mul_ps(x, _mm_set1_ps(0.70710678118654752f))))); }

void host_gelu(float* y, const float* x, std::size_t n) {
  by_fours(n, [&](std::size_t i, std::size_t k) {
    const __m128 v = load_part(x + i, k);
    store_part(y + i, _mm_mul_ps(v, cdf4(v)), k);
  });
}
void host_gelu_backward(float* dx, const float* dy, const float* x, std::size_t n) {
  by_fours(n, [&](std::size_t i, std::size_t k) {
    const __m128 v = load_part(x + i, k);
    const __m128 pdf = _mm_mul_ps(_mm_set1_ps(0.39894228040143268f), _ZGVbN4v_expf(_mm_mul_ps(_mm_set1_ps(-0.5f), _mm_mul_ps(v, v))));
    store_part(dx + i, _mm_mul_ps(load_part(dy + i, k), _mm_add_ps(cdf4(v), _mm_mul_ps(v, pdf))), k);
  });
}
/// y[j] = exp(scale·(x[j] − top)); returns their sum (added in 4 lanes, then across).
float exp_shifted(float* y, const float* x, std::size_t n, float scale, float top) {
  __m128 sum = _mm_setzero_ps();
  by_fours(n, [&](std::size_t i, std::size_t k) {
    __m128 e = _ZGVbN4v_expf(_mm_mul_ps(_mm_set1_ps(scale), _mm_sub_ps(load_part(x + i, k), _mm_set1_ps(top))));
    if (k < 4) e = _mm_and_ps(e, _mm_castsi128_ps(_mm_setr_epi32(-1, k > 1 ? -1 : 0, k > 2 ? -1 : 0, 0)));  // the padding adds nothing
    sum = _mm_add_ps(sum, e);
    store_part(y + i, e, k);
  });
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, sum);
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}
#else
void host_gelu(float* y, const float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = gelu_value(x[i]);
}
void host_gelu_backward(float* dx, const float* dy, const float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dx[i] = dy[i] * gelu_slope(x[i]);
}
float exp_shifted(float* y, const float* x, std::size_t n, float scale, float top) {
  float sum = 0.0f;
  for (std::size_t j = 0; j < n; ++j) sum += y[j] = std::exp(scale * (x[j] - top));
  return sum;
}
#endif

void host_gemm_batched(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, std::size_t sa,
                       const float* b, std::size_t sb, float beta, float* c, std::size_t sc, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) host_gemm(ta, tb, m, n, k, alpha, a + i * sa, b + i * sb, beta, c + i * sc);
}

/// Welford's running mean and M2 (Σ of squared deviations) over @p cols values, in kLanes
/// interleaved streams (column c goes to lane c mod kLanes, so the lanes' updates are independent
/// and vectorise), merged pairwise by Chan, Golub and LeVeque's formula ("Algorithms for
/// computing the sample variance", 1983), as the device's warp merges its lanes.
void welford(const float* x, std::size_t cols, float& mean, float& m2) {
  constexpr std::size_t kLanes = 8;
  float mu[kLanes] = {}, sq[kLanes] = {};
  const std::size_t full = cols / kLanes;
  for (std::size_t k = 0; k < full; ++k) {
    const float inv = 1.0f / static_cast<float>(k + 1);  // every lane has seen k + 1 values
    for (std::size_t l = 0; l < kLanes; ++l) {
      const float v = x[k * kLanes + l], d = v - mu[l];
      mu[l] += d * inv;
      sq[l] += d * (v - mu[l]);
    }
  }
  float n[kLanes];
  for (std::size_t l = 0; l < kLanes; ++l) {
    n[l] = static_cast<float>(full);
    if (full * kLanes + l < cols) {  // the tail: one more value in the first cols mod kLanes lanes
      const float v = x[full * kLanes + l], d = v - mu[l];
      n[l] += 1.0f;
      mu[l] += d / n[l];
      sq[l] += d * (v - mu[l]);
    }
  }
  for (std::size_t width = kLanes / 2; width > 0; width /= 2) {  // merge lane l + width into lane l
    for (std::size_t l = 0; l < width; ++l) {
      const float total = n[l] + n[l + width];
      if (total == 0.0f) continue;
      const float d = mu[l + width] - mu[l];
      sq[l] += sq[l + width] + d * d * n[l] * n[l + width] / total;
      mu[l] += d * n[l + width] / total;
      n[l] = total;
    }
  }
  mean = mu[0];
  m2 = sq[0];
}

void host_layernorm(float* y, float* mean, float* rstd, const float* x, const float* gamma, const float* beta, std::size_t rows,
                    std::size_t cols, float eps) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float mu = 0.0f, m2 = 0.0f;
    welford(xr, cols, mu, m2);  // only deviations are squared: no E[x²] − E[x]² cancellation
    const float rs = 1.0f / std::sqrt(m2 / static_cast<float>(cols) + eps);
    mean[r] = mu;
    rstd[r] = rs;
    float* yr = y + r * cols;
    for (std::size_t c = 0; c < cols; ++c) yr[c] = (xr[c] - mu) * rs * gamma[c] + beta[c];
  }
}

void host_layernorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x, const float* mean, const float* rstd,
                             const float* gamma, std::size_t rows, std::size_t cols) {
  const float inv_n = 1.0f / static_cast<float>(cols);
  for (std::size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    const float mu = mean[r], rs = rstd[r];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (std::size_t c = 0; c < cols; ++c) {
      const float xhat = (xr[c] - mu) * rs, g = dyr[c] * gamma[c];
      sum_g += g;
      sum_gx += g * xhat;
      if (dgamma != nullptr) dgamma[c] += dyr[c] * xhat;
      if (dbeta != nullptr) dbeta[c] += dyr[c];
    }
    const float mean_g = sum_g * inv_n, mean_gx = sum_gx * inv_n;
    float* dxr = dx + r * cols;
    for (std::size_t c = 0; c < cols; ++c) dxr[c] = rs * (dyr[c] * gamma[c] - mean_g - (xr[c] - mu) * rs * mean_gx);
  }
}

void host_embed(float* x, const float* wte, const float* wpe, const int* tokens, std::size_t rows, std::size_t T, std::size_t width) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* te = wte + static_cast<std::size_t>(tokens[r]) * width;
    const float* pe = wpe + (r % T) * width;
    for (std::size_t c = 0; c < width; ++c) x[r * width + c] = te[c] + pe[c];
  }
}

void host_embed_backward(float* dwte, float* dwpe, const float* dx, const int* tokens, std::size_t rows, std::size_t T, std::size_t width,
                         std::size_t) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* d = dx + r * width;
    if (dwte != nullptr) {
      float* g = dwte + static_cast<std::size_t>(tokens[r]) * width;
      for (std::size_t c = 0; c < width; ++c) g[c] += d[c];
    }
    if (dwpe != nullptr) {
      float* g = dwpe + (r % T) * width;
      for (std::size_t c = 0; c < width; ++c) g[c] += d[c];
    }
  }
}

void host_heads_from_rows(float* dst, const float* src, std::size_t B, std::size_t T, std::size_t H, std::size_t hd, std::size_t src_cols,
                          std::size_t offset) {
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t t = 0; t < T; ++t) {
        std::memcpy(dst + ((b * H + h) * T + t) * hd, src + (b * T + t) * src_cols + offset + h * hd, hd * sizeof(float));
      }
}

void host_rows_from_heads(float* dst, const float* src, std::size_t B, std::size_t T, std::size_t H, std::size_t hd, std::size_t dst_cols,
                          std::size_t offset) {
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t t = 0; t < T; ++t) {
        std::memcpy(dst + (b * T + t) * dst_cols + offset + h * hd, src + ((b * H + h) * T + t) * hd, hd * sizeof(float));
      }
}

void host_causal_softmax(float* p, const float* s, std::size_t groups, std::size_t rows, std::size_t cols, std::size_t offset, float scale) {
  for (std::size_t r = 0; r < groups * rows; ++r) {
    const float* sr = s + r * cols;
    float* pr = p + r * cols;
    const std::size_t seen = std::min(cols, offset + r % rows + 1);  // columns j ≤ offset + i
    float top = sr[0];
    for (std::size_t j = 1; j < seen; ++j) top = std::max(top, sr[j]);
    const float inv = 1.0f / exp_shifted(pr, sr, seen, scale, top);  // scale > 0: the max of scale·s is scale·max(s)
    for (std::size_t j = 0; j < seen; ++j) pr[j] *= inv;
    for (std::size_t j = seen; j < cols; ++j) pr[j] = 0.0f;
  }
}

void host_causal_softmax_backward(float* ds, const float* dp, const float* p, std::size_t rows, std::size_t cols, float scale) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* pr = p + r * cols;
    const float* dpr = dp + r * cols;
    float dot = 0.0f;
    for (std::size_t j = 0; j < cols; ++j) dot += pr[j] * dpr[j];
    float* dsr = ds + r * cols;
    for (std::size_t j = 0; j < cols; ++j) dsr[j] = scale * pr[j] * (dpr[j] - dot);
  }
}

void host_dropout(float* y, const float* x, std::size_t n, std::uint64_t key, std::uint64_t first, float p) {
  const float keep_scale = 1.0f / (1.0f - p);
  for (std::size_t k = 0; k < n; ++k) y[k] = dropout_keep(key, first + k, p) ? x[k] * keep_scale : 0.0f;
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
      // dy[i] loaded whatever x[i] is: a load only where x > 0 is a branch per element (the compiler
      // may not load what the source would not), mispredicted half the time on a ReLU's input.
      [](float* dx, const float* dy, const float* x, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i) {
          const float g = dy[i];
          dx[i] = x[i] > 0.0f ? g : 0.0f;
        }
      },
      host_gelu,
      host_gelu_backward,
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
      host_gemm_batched,
      host_layernorm,
      host_layernorm_backward,
      host_embed,
      host_embed_backward,
      host_heads_from_rows,
      host_rows_from_heads,
      host_causal_softmax,
      host_causal_softmax_backward,
      host_dropout,
  };
  return ops;
}

}  // namespace gpulab::nn::detail
