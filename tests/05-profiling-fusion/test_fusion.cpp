/// @file test_fusion.cpp
/// @brief Lab 05 tests. On the CPU: the byte and FLOP counts (05.1) against hand-worked values.
/// On the GPU (or the CPU emulator): softmax unfused and fused, LayerNorm forward and backward and
/// the fused attention forward against fp64 with bounds from the arithmetic, on rows of 1 to
/// 2¹⁶ + 1 elements, rows of −∞ but one, huge values (where exp without the max overflows), NaN,
/// an offset mean of 10⁴ (where E[x²] − E[x]² cancels), poisoned outputs and guard bands. On the
/// GPU only: speed as fractions of a device-to-device copy of the same bytes, fused softmax
/// against the three-kernel chain, fused attention against cuBLAS + softmax + cuBLAS.
#include <catch2/catch.hpp>
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusion.hpp"
#include "gpulab/bench.hpp"
#include "gpulab/check.hpp"
#include "gpulab/compare.hpp"
#include "gpulab/device_buffer.hpp"
#include "gpulab/random.hpp"
#include "gpulab_device_test.hpp"
#include "gpulab_test.hpp"

using gpulab::DeviceBuffer;
using gpulab::Rng;
using gpulab::testing::check_fact;
using gpulab::testing::check_guards;
using gpulab::testing::check_within;
using gpulab::testing::check_unmodified;
using lab05::Cost;
using lab05::Softmax;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();
constexpr double kU = 0x1p-24;  // fp32 unit roundoff

std::string shape(long long r, long long c) { return std::to_string(r) + "x" + std::to_string(c); }

bool near(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(b)); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// CPU: 05.1 napkin math
// ---------------------------------------------------------------------------------------------

TEST_CASE("bytes and FLOPs of softmax layernorm and attention", "[cpu][05.1]") {
  struct Row {
    const char* what;
    Cost got, want;
  };
  const long long M = 8192, N = 8192;
  const double mn = static_cast<double>(M) * N;
  const Row rows[] = {
      // the chain: max reads MN, writes M; sum reads MN + M, writes M; normalize reads MN + 2M, writes MN
      {"softmax 8192x8192 unfused", lab05::softmax_cost(M, N, false), {4 * (3 * mn + 3.0 * M), 4 * (mn + 2.0 * M), 5 * mn}},
      {"softmax 8192x8192 fused", lab05::softmax_cost(M, N, true), {4 * mn, 4 * mn, 5 * mn}},
      {"softmax 1x1 fused", lab05::softmax_cost(1, 1, true), {4, 4, 5}},
      {"layernorm forward 1024x768", lab05::layernorm_forward_cost(1024, 768), {4.0 * (1024 * 768 + 2 * 768), 4.0 * (1024 * 768 + 2 * 1024), 8.0 * 1024 * 768}},
      {"layernorm backward 1024x768", lab05::layernorm_backward_cost(1024, 768),
       {4.0 * (2 * 1024 * 768 + 768 + 2 * 1024), 4.0 * (1024 * 768 + 2 * 768), 11.0 * 1024 * 768}},
      // 16 heads of 4096 x 64: Q, K, V read (3·4096·64 each head), O and lse written
      {"attention 16 heads 4096 x 64 fused", lab05::attention_cost(16, 4096, 64, false, false),
       {4.0 * 16 * 3 * 4096 * 64, 4.0 * 16 * (4096 * 64 + 4096), 16 * 4.0 * 64 * 4096.0 * 4096}},
      {"attention 16 heads 4096 x 64 causal fused", lab05::attention_cost(16, 4096, 64, true, false),
       {4.0 * 16 * 3 * 4096 * 64, 4.0 * 16 * (4096 * 64 + 4096), 16 * 4.0 * 64 * (4096.0 * 4097 / 2)}},
      {"attention 16 heads 4096 x 64 materialized", lab05::attention_cost(16, 4096, 64, false, true),
       {4.0 * 16 * (3 * 4096 * 64 + 2 * 4096.0 * 4096), 4.0 * 16 * (4096 * 64 + 4096 + 2 * 4096.0 * 4096), 16 * 4.0 * 64 * 4096.0 * 4096}},
      {"attention 1 head 3 x 128 causal materialized", lab05::attention_cost(1, 3, 128, true, true),
       {4.0 * (3 * 3 * 128 + 2 * 9), 4.0 * (3 * 128 + 3 + 2 * 9), 4.0 * 128 * 6}},
  };
  for (const Row& r : rows) {
    char got[160], want[160];
    std::snprintf(got, sizeof got, "read %.6g B, written %.6g B, %.6g FLOP", r.got.bytes_read, r.got.bytes_written, r.got.flops);
    std::snprintf(want, sizeof want, "read %.6g B, written %.6g B, %.6g FLOP", r.want.bytes_read, r.want.bytes_written, r.want.flops);
    check_fact(near(r.got.bytes_read, r.want.bytes_read) && near(r.got.bytes_written, r.want.bytes_written) && near(r.got.flops, r.want.flops),
               std::string("cost: ") + r.what, std::string("got ") + got + "; want " + want,
               "count every fp32 element each pass reads or writes, 4 bytes each, and the FLOPs by the header's rule");
  }
  // The roofline with fp32 peaks like an H200's (67 TFLOP/s of FMA, 4.8 TB/s). Fused softmax at
  // 8192²: 537 MB in 112 µs; its 336 MFLOP would take 5 µs. Fused attention at 16 × 4096 × 64:
  // 69 GFLOP in 1.03 ms, its 70 MB in 15 µs: compute-bound.
  const double sm = lab05::roofline_seconds(lab05::softmax_cost(M, N, true), 67e12, 4.8e12);
  const double at = lab05::roofline_seconds(lab05::attention_cost(16, 4096, 64, false, false), 67e12, 4.8e12);
  char detail[160];
  std::snprintf(detail, sizeof detail, "softmax %.4g s (want %.4g), attention %.4g s (want %.4g)", sm, 8 * mn / 4.8e12, at,
                16 * 4.0 * 64 * 4096.0 * 4096 / 67e12);
  check_fact(near(sm, 8 * mn / 4.8e12) && near(at, 16 * 4.0 * 64 * 4096.0 * 4096 / 67e12), "roofline: the larger of compute time and memory time",
             detail, "max(flops / peak_flops, (bytes read + written) / bandwidth)");
}

TEST_CASE("bytes and FLOPs at random shapes none of them square", "[cpu][05.1]") {
  // The cases above are fixed sizes, and softmax's square: a cost that mixes up rows and columns,
  // or is right only at the sizes tested, passes them. These are the header's rules at 40 random
  // shapes (rows ≠ cols, seq ≠ dim), both flags of each.
  Rng rng = Rng::for_test("lab05 cost shapes");
  int wrong = 0;
  std::string first;
  auto compare = [&](const std::string& what, const Cost& got, const Cost& want) {
    if (near(got.bytes_read, want.bytes_read) && near(got.bytes_written, want.bytes_written) && near(got.flops, want.flops)) return;
    if (++wrong == 1) {
      char line[320];
      std::snprintf(line, sizeof line, "%s: read %.6g B, written %.6g B, %.6g FLOP; want %.6g, %.6g, %.6g", what.c_str(), got.bytes_read,
                    got.bytes_written, got.flops, want.bytes_read, want.bytes_written, want.flops);
      first = line;
    }
  };
  for (int i = 0; i < 40; ++i) {
    const long long m = rng.integer(1, 20000), n = m + rng.integer(1, 5000);  // rows < cols here, and the reverse below
    const double mn = static_cast<double>(m) * static_cast<double>(n);
    for (const auto& [r, c] : {std::pair{m, n}, std::pair{n, m}}) {
      const double rows = static_cast<double>(r), cols = static_cast<double>(c);
      compare("softmax " + shape(r, c) + " unfused", lab05::softmax_cost(r, c, false), {4 * (3 * mn + 3 * rows), 4 * (mn + 2 * rows), 5 * mn});
      compare("softmax " + shape(r, c) + " fused", lab05::softmax_cost(r, c, true), {4 * mn, 4 * mn, 5 * mn});
      compare("layernorm forward " + shape(r, c), lab05::layernorm_forward_cost(r, c), {4 * (mn + 2 * cols), 4 * (mn + 2 * rows), 8 * mn});
      compare("layernorm backward " + shape(r, c), lab05::layernorm_backward_cost(r, c), {4 * (2 * mn + cols + 2 * rows), 4 * (mn + 2 * cols), 11 * mn});
    }
    const long long heads = rng.integer(1, 64), seq = rng.integer(2, 8192), dim = rng.integer(1, 256) + (seq <= 256 ? 300 : 0);
    const double h = static_cast<double>(heads), s = static_cast<double>(seq), d = static_cast<double>(dim);
    for (bool causal : {false, true}) {
      for (bool materialized : {false, true}) {
        const double scores = causal ? s * (s + 1) / 2 : s * s;
        const Cost want{4 * h * (3 * s * d + (materialized ? 2 * s * s : 0)), 4 * h * (s * d + s + (materialized ? 2 * s * s : 0)), h * 4 * d * scores};
        compare("attention " + std::to_string(heads) + " heads " + shape(seq, dim) + (causal ? " causal" : "") + (materialized ? " materialized" : " fused"),
                lab05::attention_cost(heads, seq, dim, causal, materialized), want);
      }
    }
  }
  check_fact(wrong == 0, "cost: 40 random non-square shapes of each function, both orientations and every flag",
             std::to_string(wrong) + " wrong" + (first.empty() ? "" : "; first: " + first),
             "rows and columns are not interchangeable: a per-row vector has rows elements, a per-column one (gamma, beta) cols");
}

TEST_CASE("the kernels reject sizes below 1", "[cpu]") {
  bool all = true;
  auto throws = [&](const std::function<void()>& f) {
    try {
      f();
    } catch (const std::invalid_argument&) {
      return true;
    }
    return false;
  };
  all = all && throws([] { lab05::softmax(Softmax::kFused, nullptr, nullptr, 0, 4); });
  all = all && throws([] { lab05::softmax(Softmax::kUnfused, nullptr, nullptr, 4, 0); });
  all = all && throws([] { lab05::layernorm_forward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, 4, 1e-5f); });
  all = all && throws([] { lab05::layernorm_backward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 4, 0); });
  all = all && throws([] { lab05::attention_forward(nullptr, nullptr, nullptr, nullptr, nullptr, 1, 4, 96, false); });
  check_fact(all, "softmax, layernorm and attention throw std::invalid_argument for empty shapes or dim not 64/128", "one did not throw");
}

// ---------------------------------------------------------------------------------------------
// GPU (or the emulator): softmax
// ---------------------------------------------------------------------------------------------

namespace {

/// Softmax in fp64 and each element's bound: exp's relative error grows with |x − max| (the
/// subtraction's rounding), the sum's with its length (positive terms: ≤ n·u), the division one
/// more: |y − ŷ| ≤ 2·(n + |x − max| + 4)·u·y + 2⁻¹²⁶.
void reference_softmax(const std::vector<float>& x, int rows, int cols, std::vector<double>& value, std::vector<double>& bound) {
  value.assign(x.size(), 0.0);
  bound.assign(x.size(), 0.0);
  for (int r = 0; r < rows; ++r) {
    const float* xr = &x[static_cast<std::size_t>(r) * cols];
    double m = -INFINITY;
    bool nan = false;
    for (int c = 0; c < cols; ++c) {
      m = std::max(m, static_cast<double>(xr[c]));
      nan = nan || std::isnan(xr[c]);
    }
    double s = 0;
    for (int c = 0; c < cols; ++c) s += std::exp(static_cast<double>(xr[c]) - m);
    for (int c = 0; c < cols; ++c) {
      const std::size_t i = static_cast<std::size_t>(r) * cols + c;
      value[i] = nan ? NAN : std::exp(static_cast<double>(xr[c]) - m) / s;
      bound[i] = nan ? 0 : 2.0 * (cols + std::fabs(static_cast<double>(xr[c]) - m) + 4.0) * kU * value[i] + 0x1p-126;
    }
  }
}

/// Row lengths: 1, around a warp, around the warp-per-row limit, a block's worth, around the
/// on-chip limit, and 2¹⁶ + 1 (longer than any on-chip limit: the online path).
std::vector<int> softmax_lengths() {
  const long long chip = lab05::softmax_on_chip_limit();
  std::vector<int> lengths = {1, 2, 31, 32, 33, 777, 1024, 1025, 4096, 12289};
  if (chip > 1025 && chip < (1 << 16)) {
    lengths.push_back(static_cast<int>(chip));
    lengths.push_back(static_cast<int>(chip + 1));
  }
  lengths.push_back((1 << 16) + 1);
  return lengths;
}

void check_softmax(Softmax variant) {
  const std::string name = variant == Softmax::kFused ? "softmax fused" : "softmax unfused";
  Rng rng = Rng::for_test(name);
  for (int cols : softmax_lengths()) {
    const int rows = cols > 20000 ? 3 : cols > 2000 ? 6 : 37;
    std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(rows) * cols, -8.0f, 8.0f);
    // Row 1: −∞ but one finite value (one-hot); row 2: huge values (exp without the max
    // overflows); last row: a NaN, first in its row (where fmaxf(−∞, NaN) = −∞ would lose it).
    if (rows > 2) {
      for (int c = 0; c < cols; ++c) x[static_cast<std::size_t>(cols) + c] = -kInf;
      x[static_cast<std::size_t>(cols) + cols / 2] = 3.0f;
      for (int c = 0; c < cols; ++c) x[2 * static_cast<std::size_t>(cols) + c] = 1e30f + 1e24f * static_cast<float>(c % 7);
      x[static_cast<std::size_t>(rows - 1) * cols] = kNaN;
    }
    std::vector<double> want, bound;
    reference_softmax(x, rows, cols, want, bound);
    DeviceBuffer<float> dx(x), dy(x.size());
    dy.fill(kNaN);
    lab05::softmax(variant, dx.data(), dy.data(), rows, cols, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> got = dy.download();
    // NaN where the reference is NaN is right: compare those elements by hand, the rest by bound.
    std::vector<float> g;
    std::vector<double> w, b;
    bool nan_ok = true;
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (std::isnan(want[i])) {
        nan_ok = nan_ok && std::isnan(got[i]);
        continue;
      }
      g.push_back(got[i]);
      w.push_back(want[i]);
      b.push_back(bound[i]);
    }
    const std::string what = name + " " + shape(rows, cols);
    check_within(g, w, b, what,
                 "bound 2*(n + |x - max| + 4)*2^-24*y. NaN or inf on the huge row: exp without subtracting the max; a row of all NaN: "
                 "-inf - -inf; wrong only on long rows: the online path's rescaling");
    if (rows > 2) check_fact(nan_ok, what + ": a NaN in a row gives NaN", "the NaN row has finite outputs");
    check_guards(dy, "y");
    const std::vector<float> x_after = dx.download();  // bit for bit: x holds NaN and -inf on purpose
    check_fact(std::memcmp(x_after.data(), x.data(), x.size() * sizeof(float)) == 0, what + ": x unmodified", "the input was written to");
  }
}

}  // namespace

TEST_CASE("softmax unfused is right on every row length", "[gpu]") { check_softmax(Softmax::kUnfused); }
TEST_CASE("softmax fused is right on every row length", "[gpu][05.2]") { check_softmax(Softmax::kFused); }

// ---------------------------------------------------------------------------------------------
// GPU (or the emulator): LayerNorm forward and backward
// ---------------------------------------------------------------------------------------------

namespace {

struct LayerNormData {
  int rows, cols;
  std::vector<float> x, gamma, beta, dy;
  std::vector<double> mean, rstd;  ///< fp64
};

LayerNormData layernorm_data(int rows, int cols, float offset, Rng& rng) {
  LayerNormData d{rows, cols, rng.uniform_vector(static_cast<std::size_t>(rows) * cols, -1.0f, 1.0f),
                  rng.uniform_vector(static_cast<std::size_t>(cols), 0.5f, 1.5f), rng.uniform_vector(static_cast<std::size_t>(cols), -0.5f, 0.5f),
                  rng.uniform_vector(static_cast<std::size_t>(rows) * cols, -1.0f, 1.0f), {}, {}};
  for (float& v : d.x) v += offset;
  d.mean.resize(rows);
  d.rstd.resize(rows);
  for (int r = 0; r < rows; ++r) {
    double s = 0, ss = 0;
    for (int c = 0; c < cols; ++c) s += d.x[static_cast<std::size_t>(r) * cols + c];
    const double mu = s / cols;
    for (int c = 0; c < cols; ++c) ss += (d.x[static_cast<std::size_t>(r) * cols + c] - mu) * (d.x[static_cast<std::size_t>(r) * cols + c] - mu);
    d.mean[r] = mu;
    d.rstd[r] = 1.0 / std::sqrt(ss / cols + 1e-5);
  }
  return d;
}

/// Shapes: one column, odd widths, GPT-2's 768, a width past a block's threads, and 16384; with
/// a mean of 10⁴ against a spread of 1, where Σx² − (Σx)²/n loses every digit in fp32.
struct LnShape {
  int rows, cols;
  float offset;
};
const LnShape kLnShapes[] = {{5, 1, 0.0f}, {33, 7, 0.0f}, {64, 768, 0.0f}, {17, 1000, 1e4f}, {9, 4097, 0.0f}, {4, 16384, 3.0f}, {40, 768, 1e4f}};

}  // namespace

TEST_CASE("layernorm forward is right with Welford on offset data", "[gpu][05.3]") {
  Rng rng = Rng::for_test("layernorm forward");
  for (const LnShape& s : kLnShapes) {
    const LayerNormData d = layernorm_data(s.rows, s.cols, s.offset, rng);
    DeviceBuffer<float> x(d.x), gamma(d.gamma), beta(d.beta), y(d.x.size()), mean(s.rows), rstd(s.rows);
    y.fill(kNaN);
    mean.fill(kNaN);
    rstd.fill(kNaN);
    lab05::layernorm_forward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), s.rows, s.cols, 1e-5f, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    // The bound: the mean may err by 256 u of |mean| (a sum in any order over a few hundred terms
    // per thread), rstd by 256 u relative, the last four operations 8 u.
    std::vector<double> want(d.x.size()), bound(d.x.size()), want_mean(d.mean), bound_mean(s.rows), want_rstd(d.rstd), bound_rstd(s.rows);
    for (int r = 0; r < s.rows; ++r) {
      bound_mean[r] = 256 * kU * std::fabs(d.mean[r]) + 256 * kU / d.rstd[r];
      bound_rstd[r] = 256 * kU * d.rstd[r] * (1.0 + std::fabs(d.mean[r]) * d.rstd[r] * 1e-3);
      for (int c = 0; c < s.cols; ++c) {
        const std::size_t i = static_cast<std::size_t>(r) * s.cols + c;
        const double xhat = (d.x[i] - d.mean[r]) * d.rstd[r];
        want[i] = xhat * d.gamma[c] + d.beta[c];
        bound[i] = kU * (256 * std::fabs(d.gamma[c]) * d.rstd[r] * std::fabs(d.mean[r]) + 264 * std::fabs(d.gamma[c] * xhat) + 8 * std::fabs(d.beta[c])) + 1e-6;
      }
    }
    const std::string what = "layernorm forward " + shape(s.rows, s.cols) + (s.offset != 0 ? " mean " + std::to_string(static_cast<int>(s.offset)) : "");
    check_within(y.download(), want, bound, what,
                 "far off only on the offset rows: the variance as E[x^2] - E[x]^2 (cancellation); use Welford and merge partial "
                 "(n, mean, M2) triples with Chan's formula");
    check_within(mean.download(), want_mean, bound_mean, what + ": saved mean");
    check_within(rstd.download(), want_rstd, bound_rstd, what + ": saved rstd = 1/sqrt(var + eps), biased var");
    check_guards(y, "y");
    check_unmodified(x, d.x, "x");
  }
}

TEST_CASE("layernorm backward is right for dx dgamma and dbeta", "[gpu][05.4]") {
  Rng rng = Rng::for_test("layernorm backward");
  for (const LnShape& s : kLnShapes) {
    const LayerNormData d = layernorm_data(s.rows, s.cols, s.offset, rng);
    std::vector<float> mean32(d.mean.begin(), d.mean.end()), rstd32(d.rstd.begin(), d.rstd.end());
    DeviceBuffer<float> dy(d.dy), x(d.x), gamma(d.gamma), mean(mean32), rstd(rstd32), dx(d.x.size()), dgamma(s.cols), dbeta(s.cols);
    dx.fill(kNaN);
    dgamma.fill(kNaN);  // overwritten, not accumulated into
    dbeta.fill(kNaN);
    lab05::layernorm_backward(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), dx.data(), dgamma.data(), dbeta.data(), s.rows, s.cols,
                              nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    // fp64 from the same fp32 mean and rstd the kernel is given.
    const int n = s.cols;
    std::vector<double> want_dx(d.x.size()), bound_dx(d.x.size()), want_g(n, 0.0), bound_g(n, 0.0), want_b(n, 0.0), bound_b(n, 0.0);
    for (int r = 0; r < s.rows; ++r) {
      double sum_g = 0, sum_gx = 0, abs_g = 0, abs_gx = 0;
      for (int c = 0; c < n; ++c) {
        const std::size_t i = static_cast<std::size_t>(r) * n + c;
        const double xhat = (d.x[i] - static_cast<double>(mean32[r])) * rstd32[r], g = static_cast<double>(d.dy[i]) * d.gamma[c];
        sum_g += g;
        sum_gx += g * xhat;
        abs_g += std::fabs(g);
        abs_gx += std::fabs(g * xhat);
        want_g[c] += d.dy[i] * xhat;
        want_b[c] += d.dy[i];
        bound_g[c] += std::fabs(d.dy[i] * xhat);
        bound_b[c] += std::fabs(static_cast<double>(d.dy[i]));
      }
      for (int c = 0; c < n; ++c) {
        const std::size_t i = static_cast<std::size_t>(r) * n + c;
        const double xhat = (d.x[i] - static_cast<double>(mean32[r])) * rstd32[r], g = static_cast<double>(d.dy[i]) * d.gamma[c];
        want_dx[i] = rstd32[r] * (g - sum_g / n - xhat * sum_gx / n);
        // x̂ itself is computed in fp32 from an x that may sit 10⁴ from the mean: its error is
        // u·|x|·rstd; the two means are sums of n terms.
        bound_dx[i] = 2 * kU * rstd32[r] * ((n + 16.0) * (abs_g + std::fabs(xhat) * abs_gx) / n + 8 * std::fabs(g) +
                                            64 * std::fabs(d.x[i]) * rstd32[r] * (std::fabs(g) + abs_gx / n));
      }
    }
    for (int c = 0; c < n; ++c) {
      bound_g[c] *= 2 * (s.rows + 16.0) * kU;
      bound_g[c] += 64 * kU * s.rows * (std::fabs(s.offset) + 1) * 4.0;  // x̂'s own rounding, as above
      bound_b[c] *= 2 * (s.rows + 16.0) * kU;
    }
    const std::string what = "layernorm backward " + shape(s.rows, s.cols) + (s.offset != 0 ? " mean " + std::to_string(static_cast<int>(s.offset)) : "");
    check_within(dx.download(), want_dx, bound_dx, what + ": dx",
                 "dx = rstd*(dy*gamma - mean(dy*gamma) - xhat*mean(dy*gamma*xhat)), both means over the row");
    check_within(dgamma.download(), want_g, bound_g, what + ": dgamma",
                 "dgamma = sum over rows of dy*xhat, written (not added to what was there); NaN: a column never written");
    check_within(dbeta.download(), want_b, bound_b, what + ": dbeta", "dbeta = sum over rows of dy");
    check_guards(dx, "dx");
    check_guards(dgamma, "dgamma");
    check_unmodified(dy, d.dy, "dy");
  }
}

// ---------------------------------------------------------------------------------------------
// GPU (or the emulator): fused attention forward (stretch)
// ---------------------------------------------------------------------------------------------

namespace {

/// Attention of one head in fp64 (T = double) or as an unfused fp32 chain computes it (T = float).
template <class T>
void reference_attention(const float* q, const float* k, const float* v, int seq, int dim, bool causal, std::vector<T>& o, std::vector<T>& lse) {
  o.assign(static_cast<std::size_t>(seq) * dim, T(0));
  lse.assign(static_cast<std::size_t>(seq), T(0));
  const T scale = T(1) / std::sqrt(static_cast<T>(dim));
  std::vector<T> s(static_cast<std::size_t>(seq));
  for (int i = 0; i < seq; ++i) {
    const int visible = causal ? i + 1 : seq;
    T m = -std::numeric_limits<T>::infinity();
    for (int j = 0; j < visible; ++j) {
      T dot = 0;
      for (int d = 0; d < dim; ++d) dot += static_cast<T>(q[i * dim + d]) * static_cast<T>(k[j * dim + d]);
      s[j] = dot * scale;
      m = std::max(m, s[j]);
    }
    T sum = 0;
    for (int j = 0; j < visible; ++j) sum += std::exp(s[j] - m);
    for (int j = 0; j < visible; ++j) {
      const T p = std::exp(s[j] - m) / sum;
      for (int d = 0; d < dim; ++d) o[static_cast<std::size_t>(i) * dim + d] += p * static_cast<T>(v[j * dim + d]);
    }
    lse[i] = m + std::log(sum);
  }
}

void check_attention(int heads, int seq, int dim, bool causal) {
  Rng rng = Rng::for_test("attention " + std::to_string(seq) + " " + std::to_string(dim));
  const std::size_t n = static_cast<std::size_t>(heads) * seq * dim;
  const std::vector<float> q = rng.uniform_vector(n, -1.0f, 1.0f), k = rng.uniform_vector(n, -1.0f, 1.0f), v = rng.uniform_vector(n, -1.0f, 1.0f);
  DeviceBuffer<float> dq(q), dk(k), dv(v), dout(n), dlse(static_cast<std::size_t>(heads) * seq);
  dout.fill(kNaN);
  dlse.fill(kNaN);
  lab05::attention_forward(dq.data(), dk.data(), dv.data(), dout.data(), dlse.data(), heads, seq, dim, causal, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> got = dout.download(), got_lse = dlse.download();
  // FlashAttention's rule: the fused kernel's worst error against fp64 at most twice the unfused
  // fp32 chain's, plus u·max|V| (a floor, so that a lucky chain does not demand exactness).
  double worst = 0, chain = 0, worst_lse = 0, chain_lse = 0, vmax = 0;
  bool finite = true;
  for (int h = 0; h < heads; ++h) {
    const std::size_t base = static_cast<std::size_t>(h) * seq * dim;
    std::vector<double> o64, lse64;
    std::vector<float> o32, lse32;
    reference_attention<double>(&q[base], &k[base], &v[base], seq, dim, causal, o64, lse64);
    reference_attention<float>(&q[base], &k[base], &v[base], seq, dim, causal, o32, lse32);
    for (std::size_t i = 0; i < o64.size(); ++i) {
      finite = finite && std::isfinite(got[base + i]);
      worst = std::max(worst, std::fabs(got[base + i] - o64[i]));
      chain = std::max(chain, std::fabs(o32[i] - o64[i]));
      vmax = std::max(vmax, std::fabs(static_cast<double>(v[base + i])));
    }
    for (int i = 0; i < seq; ++i) {
      finite = finite && std::isfinite(got_lse[static_cast<std::size_t>(h) * seq + i]);
      worst_lse = std::max(worst_lse, std::fabs(got_lse[static_cast<std::size_t>(h) * seq + i] - lse64[i]));
      chain_lse = std::max(chain_lse, std::fabs(lse32[i] - lse64[i]));
    }
  }
  const double allowed = 2 * chain + 2 * kU * vmax, allowed_lse = 2 * chain_lse + 64 * kU * std::log(static_cast<double>(seq) + 1);
  char detail[240];
  std::snprintf(detail, sizeof detail, "worst |O - O64| %.3g (the fp32 chain's %.3g; allowed %.3g); worst lse error %.3g (allowed %.3g)%s", worst,
                chain, allowed, worst_lse, allowed_lse, finite ? "" : "; NaN or inf in the output");
  check_fact(finite && worst <= allowed && worst_lse <= allowed_lse,
             "attention forward " + std::to_string(heads) + " heads x " + std::to_string(seq) + " x " + std::to_string(dim) + (causal ? " causal" : ""),
             detail, "rescale both the running sum and the output accumulator by exp(old max - new max) at every tile; lse = max + log(sum)");
  check_guards(dout, "O");
  check_guards(dlse, "lse");
  check_unmodified(dq, q, "Q");
  check_unmodified(dk, k, "K");
  check_unmodified(dv, v, "V");
}

}  // namespace

TEST_CASE("attention forward fused is right causal and not", "[gpu][05.5][stretch]") {
  for (const auto& [seq, dim] : {std::pair<int, int>{1, 64}, {17, 64}, {64, 128}, {130, 64}, {100, 128}}) {
    check_attention(2, seq, dim, false);
    check_attention(2, seq, dim, true);
  }
}

// ---------------------------------------------------------------------------------------------
// GPU: speed, as fractions of a device-to-device copy of the same bytes
// ---------------------------------------------------------------------------------------------

namespace {

/// 8192 × 8192 (256 MiB per matrix: more than any L2) where memory allows.
int perf_side() {
  std::size_t free_bytes = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  int n = 8192;
  while (n > 1024 && static_cast<std::size_t>(n) * n * sizeof(float) * 6 > free_bytes) n /= 2;
  return n;
}

/// Row @p r of a row-major device matrix with @p cols columns.
std::vector<float> device_row(const float* base, std::size_t r, int cols) {
  std::vector<float> row(static_cast<std::size_t>(cols));
  CUDA_CHECK(cudaMemcpy(row.data(), base + r * cols, row.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return row;
}

/// The rows a speed case spot-checks: the first, one in the middle, the last.
std::vector<std::size_t> spot_rows(std::size_t rows) { return {0, rows / 2, rows - 1}; }

/// A speed case's spot check: the output of one untimed call, on a few rows, against fp64 (its
/// correctness case holds the precision: here each value may be off by its correctness bound where
/// the test has one, and by 10⁻³·(|want| + scale) besides). Only a kernel that computes its
/// function gets a speed: an empty one would be the fastest of all.
struct Spot {
  double worst = 0;  ///< the worst |got − want| / allowed
  bool finite = true;
  void add(double got, double want, double scale, double bound = 0) {
    finite = finite && std::isfinite(got);
    worst = std::max(worst, std::fabs(got - want) / (bound + 1e-3 * (std::fabs(want) + scale)));
  }
  bool holds(const std::string& what) const {
    const bool ok = finite && worst <= 1;
    char detail[160];
    std::snprintf(detail, sizeof detail, "worst error %.3g of what is allowed%s", worst, finite ? "" : "; NaN or inf in the output");
    check_fact(ok, what + ": the timed kernel's output is right on spot rows", detail,
               "no speed without the right values: see this TODO's correctness case");
    return ok;
  }
};

}  // namespace

TEST_CASE("softmax fused speed", "[gpu][perf][05.2]") {
  const int n = perf_side();
  const std::size_t count = static_cast<std::size_t>(n) * n;
  DeviceBuffer<float> x(Rng::for_test("softmax perf").uniform_vector(count, -8.0f, 8.0f)), y(count);
  if (gpulab::testing::profile_run()) {  // once, for ncu: the minimum is x read and y written once
    lab05::softmax(Softmax::kFused, x.data(), y.data(), n, n, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::printf("gpulab-profile: min_bytes %.0f\n", 2.0 * sizeof(float) * static_cast<double>(count));
    return;
  }
  y.fill(kNaN);
  lab05::softmax(Softmax::kFused, x.data(), y.data(), n, n, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  Spot spot;
  for (const std::size_t r : spot_rows(static_cast<std::size_t>(n))) {
    const std::vector<float> xr = device_row(x.data(), r, n), yr = device_row(y.data(), r, n);
    std::vector<double> want, bound;
    reference_softmax(xr, 1, n, want, bound);
    for (int c = 0; c < n; ++c) spot.add(yr[c], want[c], 1.0 / n, bound[c]);
  }
  if (!spot.holds("softmax fused " + shape(n, n))) return;
  const double copy = gpulab::measure_d2d_memcpy_gbs(count * sizeof(float));
  const double min_bytes = 2.0 * sizeof(float) * static_cast<double>(count);  // x read once, y written once (the test's count, not 05.1's)
  const gpulab::BenchResult fused = gpulab::bench([&](cudaStream_t s) { lab05::softmax(Softmax::kFused, x.data(), y.data(), n, n, s); });
  const gpulab::BenchResult chain = gpulab::bench([&](cudaStream_t s) { lab05::softmax(Softmax::kUnfused, x.data(), y.data(), n, n, s); });
  const double gbs = min_bytes / (fused.median_ms * 1e6), speedup = chain.median_ms / fused.median_ms;
  char detail[200];
  std::snprintf(detail, sizeof detail, "%dx%d: fused %.3f ms (%.0f GB/s of the minimum bytes), the three-kernel chain %.3f ms: %.2fx", n, n, fused.median_ms,
                gbs, chain.median_ms, speedup);
  check_fact(speedup >= 1.6, "softmax fused is at least 1.6x the three-kernel chain", detail,
             "the chain moves about 4MN elements and fused 2MN: read each row once (registers or shared memory) and write it once");
  gpulab::testing::record_performance("softmax_fused", gbs, "GB/s", copy, "D2D cudaMemcpy",
                                      {{"timing", fused.describe()}, {"note", detail}, {"gpu_state", gpulab::testing::gpu_state_fields(fused)}});
}

TEST_CASE("layernorm forward speed", "[gpu][perf][05.3]") {
  const int rows = perf_side(), cols = 8192;
  const std::size_t count = static_cast<std::size_t>(rows) * cols;
  Rng rng = Rng::for_test("layernorm perf");
  DeviceBuffer<float> x(rng.uniform_vector(count, -1.0f, 1.0f)), gamma(rng.uniform_vector(cols, 0.5f, 1.5f)), beta(rng.uniform_vector(cols, -0.5f, 0.5f)),
      y(count), mean(rows), rstd(rows);
  if (gpulab::testing::profile_run()) {  // once, for ncu: x, gamma, beta read, y, mean, rstd written
    lab05::layernorm_forward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows, cols, 1e-5f, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::printf("gpulab-profile: min_bytes %.0f\n", sizeof(float) * (2.0 * static_cast<double>(count) + 2.0 * cols + 2.0 * rows));
    return;
  }
  y.fill(kNaN);
  mean.fill(kNaN);
  rstd.fill(kNaN);
  lab05::layernorm_forward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows, cols, 1e-5f, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  {
    const std::vector<float> g = gamma.download(), b = beta.download(), mu = mean.download(), rs = rstd.download();
    Spot spot;
    for (const std::size_t r : spot_rows(static_cast<std::size_t>(rows))) {
      const std::vector<float> xr = device_row(x.data(), r, cols), yr = device_row(y.data(), r, cols);
      double sum = 0, ss = 0;
      for (const float v : xr) sum += v;
      const double m = sum / cols;
      for (const float v : xr) ss += (v - m) * (v - m);
      const double inv = 1.0 / std::sqrt(ss / cols + 1e-5);
      spot.add(mu[r], m, 1.0);
      spot.add(rs[r], inv, 1.0);
      for (int c = 0; c < cols; ++c) spot.add(yr[c], (xr[c] - m) * inv * g[c] + b[c], 1.0);
    }
    if (!spot.holds("layernorm forward " + shape(rows, cols))) return;
  }
  const double copy = gpulab::measure_d2d_memcpy_gbs(count * sizeof(float));
  // x, γ, β read; y, mean, rstd written (the test's count, not 05.1's)
  const double min_bytes = sizeof(float) * (2.0 * static_cast<double>(count) + 2.0 * cols + 2.0 * rows);
  const gpulab::BenchResult r = gpulab::bench(
      [&](cudaStream_t s) { lab05::layernorm_forward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows, cols, 1e-5f, s); });
  gpulab::testing::record_performance("layernorm_forward", min_bytes / (r.median_ms * 1e6), "GB/s", copy,
                                      "D2D cudaMemcpy", {{"timing", r.describe()}, {"gpu_state", gpulab::testing::gpu_state_fields(r)}});
}

TEST_CASE("layernorm backward speed", "[gpu][perf][05.4]") {
  const int rows = perf_side(), cols = 8192;
  const std::size_t count = static_cast<std::size_t>(rows) * cols;
  Rng rng = Rng::for_test("layernorm backward perf");
  const std::vector<float> dy_host = rng.uniform_vector(count, -1.0f, 1.0f), x_host = rng.uniform_vector(count, -1.0f, 1.0f),
                           gamma_host = rng.uniform_vector(cols, 0.5f, 1.5f);
  // Every row's mean 0 and rstd 1.7: x̂ = 1.7·x (the speed does not depend on them).
  DeviceBuffer<float> dy(dy_host), x(x_host), gamma(gamma_host), mean(std::vector<float>(rows, 0.0f)), rstd(std::vector<float>(rows, 1.7f)), dx(count),
      dgamma(cols), dbeta(cols);
  dx.fill(kNaN);
  dgamma.fill(kNaN);
  dbeta.fill(kNaN);
  lab05::layernorm_backward(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), dx.data(), dgamma.data(), dbeta.data(), rows, cols, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  {
    Spot spot;
    const double rs = static_cast<double>(1.7f);
    for (const std::size_t r : spot_rows(static_cast<std::size_t>(rows))) {
      const std::vector<float> got = device_row(dx.data(), r, cols);
      double sum_g = 0, sum_gx = 0, abs_g = 0, abs_gx = 0;
      for (int c = 0; c < cols; ++c) {
        const double g = static_cast<double>(dy_host[r * cols + c]) * gamma_host[c];
        sum_g += g;
        sum_gx += g * x_host[r * cols + c] * rs;
        abs_g += std::fabs(g);
        abs_gx += std::fabs(g * x_host[r * cols + c] * rs);
      }
      for (int c = 0; c < cols; ++c) {
        const double g = static_cast<double>(dy_host[r * cols + c]) * gamma_host[c], xhat = x_host[r * cols + c] * rs;
        // The correctness case's bound for dx (its two means are sums of a row's terms).
        const double bound = 2 * kU * rs *
                             ((cols + 16.0) * (abs_g + std::fabs(xhat) * abs_gx) / cols + 8 * std::fabs(g) +
                              64 * std::fabs(static_cast<double>(x_host[r * cols + c])) * rs * (std::fabs(g) + abs_gx / cols));
        spot.add(got[c], rs * (g - sum_g / cols - xhat * sum_gx / cols), 1.0, bound);
      }
    }
    const std::vector<float> got_g = dgamma.download(), got_b = dbeta.download();
    for (const std::size_t c : spot_rows(static_cast<std::size_t>(cols))) {  // columns, here: each a sum over every row
      double want_g = 0, want_b = 0, size_g = 0, size_b = 0;
      for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
        want_g += static_cast<double>(dy_host[r * cols + c]) * x_host[r * cols + c] * rs;
        want_b += dy_host[r * cols + c];
        size_g += std::fabs(static_cast<double>(dy_host[r * cols + c]) * x_host[r * cols + c] * rs);
        size_b += std::fabs(static_cast<double>(dy_host[r * cols + c]));
      }
      // Sums over every row: the correctness case's bound, 2·(rows + 16)·u·Σ|terms|.
      spot.add(got_g[c], want_g, 1.0, 2 * (rows + 16.0) * kU * size_g);
      spot.add(got_b[c], want_b, 1.0, 2 * (rows + 16.0) * kU * size_b);
    }
    if (!spot.holds("layernorm backward " + shape(rows, cols))) return;
  }
  const double copy = gpulab::measure_d2d_memcpy_gbs(count * sizeof(float));
  // dy, x, γ, mean, rstd read; dx, dγ, dβ written (the test's count, not 05.1's)
  const double min_bytes = sizeof(float) * (3.0 * static_cast<double>(count) + 3.0 * cols + 2.0 * rows);
  const gpulab::BenchResult r = gpulab::bench([&](cudaStream_t s) {
    lab05::layernorm_backward(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), dx.data(), dgamma.data(), dbeta.data(), rows, cols, s);
  });
  gpulab::testing::record_performance("layernorm_backward", min_bytes / (r.median_ms * 1e6), "GB/s", copy,
                                      "D2D cudaMemcpy", {{"timing", r.describe()}, {"gpu_state", gpulab::testing::gpu_state_fields(r)}});
}

TEST_CASE("attention forward fused speed", "[gpu][perf][05.5][stretch]") {
  const int heads = 8, seq = 4096, dim = 64;
  const std::size_t n = static_cast<std::size_t>(heads) * seq * dim, scores = static_cast<std::size_t>(heads) * seq * seq;
  Rng rng = Rng::for_test("attention perf");
  DeviceBuffer<float> q(rng.uniform_vector(n, -1.0f, 1.0f)), k(rng.uniform_vector(n, -1.0f, 1.0f)), v(rng.uniform_vector(n, -1.0f, 1.0f)), o(n),
      lse(static_cast<std::size_t>(heads) * seq), s(scores), p(scores);
  cublasHandle_t handle = nullptr;
  CUBLAS_CHECK(cublasCreate(&handle));
  // The unfused chain: S = Q·Kᵀ/√d (cuBLAS, per head), P = softmax(S) (the given three-kernel
  // chain, the same in every build), O = P·V (cuBLAS). Row-major X is column-major Xᵀ: S row-major = (K·Qᵀ) column-major.
  auto unfused = [&](cudaStream_t st) {
    CUBLAS_CHECK(cublasSetStream(handle, st));
    const float scale = 1.0f / std::sqrt(static_cast<float>(dim)), one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasSgemmStridedBatched(handle, CUBLAS_OP_T, CUBLAS_OP_N, seq, seq, dim, &scale, k.data(), dim, static_cast<long long>(seq) * dim,
                                           q.data(), dim, static_cast<long long>(seq) * dim, &zero, s.data(), seq,
                                           static_cast<long long>(seq) * seq, heads));
    lab05::softmax(Softmax::kUnfused, s.data(), p.data(), heads * seq, seq, st);
    CUBLAS_CHECK(cublasSgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, dim, seq, seq, &one, v.data(), dim, static_cast<long long>(seq) * dim,
                                           p.data(), seq, static_cast<long long>(seq) * seq, &zero, o.data(), dim, static_cast<long long>(seq) * dim,
                                           heads));
  };
  o.fill(kNaN);
  lse.fill(kNaN);
  lab05::attention_forward(q.data(), k.data(), v.data(), o.data(), lse.data(), heads, seq, dim, false, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  {
    // A few queries of the first and last heads, each against fp64 over all of its keys.
    const std::vector<float> qh = q.download(), kh = k.download(), vh = v.download(), oh = o.download(), lh = lse.download();
    Spot spot;
    for (const int h : {0, heads - 1}) {
      for (const std::size_t i : spot_rows(static_cast<std::size_t>(seq))) {
        const std::size_t base = static_cast<std::size_t>(h) * seq * dim;
        std::vector<double> score(static_cast<std::size_t>(seq)), out(static_cast<std::size_t>(dim), 0.0);
        double m = -INFINITY, sum = 0;
        for (int j = 0; j < seq; ++j) {
          double dot = 0;
          for (int d = 0; d < dim; ++d) dot += static_cast<double>(qh[base + i * dim + d]) * kh[base + static_cast<std::size_t>(j) * dim + d];
          score[j] = dot / std::sqrt(static_cast<double>(dim));
          m = std::max(m, score[j]);
        }
        for (int j = 0; j < seq; ++j) sum += std::exp(score[j] - m);
        for (int j = 0; j < seq; ++j) {
          for (int d = 0; d < dim; ++d) out[d] += std::exp(score[j] - m) / sum * vh[base + static_cast<std::size_t>(j) * dim + d];
        }
        for (int d = 0; d < dim; ++d) spot.add(oh[base + i * dim + d], out[d], 1.0);
        spot.add(lh[static_cast<std::size_t>(h) * seq + i], m + std::log(sum), 1.0);
      }
    }
    if (!spot.holds("attention forward " + std::to_string(heads) + " heads x " + std::to_string(seq) + " x " + std::to_string(dim))) {
      cublasDestroy(handle);
      return;
    }
  }
  const gpulab::BenchResult chain = gpulab::bench(unfused);
  const gpulab::BenchResult fused =
      gpulab::bench([&](cudaStream_t st) { lab05::attention_forward(q.data(), k.data(), v.data(), o.data(), lse.data(), heads, seq, dim, false, st); });
  cublasDestroy(handle);
  const double flops = 4.0 * heads * dim * static_cast<double>(seq) * seq;  // Q·Kᵀ and P·V (the test's count, not 05.1's)
  char detail[200];
  std::snprintf(detail, sizeof detail, "%d heads x %d x %d: fused %.3f ms, cuBLAS + softmax + cuBLAS %.3f ms: %.2fx", heads, seq, dim, fused.median_ms,
                chain.median_ms, chain.median_ms / fused.median_ms);
  gpulab::testing::record_performance("attention_forward", flops / (fused.median_ms * 1e9), "TFLOP/s", flops / (chain.median_ms * 1e9),
                                      "cuBLAS + softmax + cuBLAS (the score matrix through memory)", {{"timing", fused.describe()}, {"note", detail}});
}
