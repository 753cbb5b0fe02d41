/// @file test_hgemm.cpp
/// @brief Lab 04 HGEMM tests. On the GPU (or the CPU emulator, which follows the PTX fragment
/// layouts): every rung against an fp64 product of the fp16 inputs at awkward shapes (misaligned
/// pointers, sizes not multiples of 16, NaN-poisoned output, guard bands, inputs unmodified),
/// with the elementwise bound of fp32 accumulation on tensor cores; the shared-memory structure
/// of v2+; the cuBLAS fp16 baseline against fp64. On the GPU only: each rung's speed at 4096³
/// against the same reference rung and cublasGemmEx, verified before timing (within 2× cuBLAS's
/// own error, FlashAttention's rule).
#include <catch2/catch.hpp>
#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpulab/bench.hpp"
#include "gpulab/check.hpp"
#include "gpulab/compare.hpp"
#include "gpulab/device_buffer.hpp"
#include "gpulab/random.hpp"
#include "gpulab/report.hpp"
#include "gpulab_device_test.hpp"
#include "gpulab_test.hpp"
#include "hgemm.hpp"

using gpulab::DeviceBuffer;
using gpulab::Rng;
using gpulab::testing::check_fact;
using gpulab::testing::check_guards;
using gpulab::testing::check_within;
using gpulab::testing::check_unmodified;
using lab04::Rung;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

/// Tensor cores sum their products in fp32 but truncate instead of rounding to nearest (Fasi,
/// Higham, Mikaitis, Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ CS 2021): take
/// u = 2⁻²³ rather than 2⁻²⁴, and the constant 2 of lab 03 for 1/(1 − K·u). The bound is
/// 2·(K + 2)·2⁻²³·(|A|·|B|)ᵢⱼ.
constexpr double kTensorCoreU = 0x1p-23;

const char* rung_name(Rung r) {
  switch (r) {
    case Rung::kWmmaNaive: return "v1 wmma naive";
    case Rung::kWmmaShared: return "v2 wmma shared";
    case Rung::kMmaLdmatrix: return "v3 mma ldmatrix";
    case Rung::kMmaPipelined: return "v4 mma cp.async";
  }
  return "?";
}

std::string shape_text(int M, int N, int K) { return std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K); }

std::vector<__half> to_half(const std::vector<float>& v) {
  std::vector<__half> h(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) h[i] = __float2half_rn(v[i]);
  return h;
}

/// The exact product of the fp16 inputs in fp64 (every product of two halves and their sums up to
/// K ≈ 2¹⁸ are exact in fp64 or within 2⁻⁵³ of it) and each element's bound.
struct Expected {
  std::vector<double> value, bound, magnitude;
};

Expected reference_hgemm(int M, int N, int K, const std::vector<__half>& A, const std::vector<__half>& B) {
  const std::size_t m = M, n = N, k = K;
  std::vector<double> a(m * k), b(k * n);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = __half2float(A[i]);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = __half2float(B[i]);
  Expected e{std::vector<double>(m * n, 0.0), std::vector<double>(m * n), std::vector<double>(m * n, 0.0)};
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t p = 0; p < k; ++p) {
      const double x = a[i * k + p], ax = std::fabs(x);
      for (std::size_t j = 0; j < n; ++j) {
        e.value[i * n + j] += x * b[p * n + j];
        e.magnitude[i * n + j] += ax * std::fabs(b[p * n + j]);
      }
    }
  }
  for (std::size_t x = 0; x < m * n; ++x) e.bound[x] = 2.0 * (K + 2.0) * kTensorCoreU * e.magnitude[x];
  return e;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// CPU: the launcher's contract, and the yardstick
// ---------------------------------------------------------------------------------------------

TEST_CASE("hgemm rejects sizes below 1", "[cpu]") {
  for (const auto& [M, N, K] : {std::array<int, 3>{0, 4, 4}, {4, 0, 4}, {4, 4, 0}, {-3, 4, 4}}) {
    bool threw = false;
    try {
      lab04::hgemm(Rung::kWmmaShared, M, N, K, nullptr, nullptr, nullptr, nullptr);
    } catch (const std::invalid_argument&) {
      threw = true;
    }
    check_fact(threw, "hgemm " + shape_text(M, N, K) + " throws std::invalid_argument", "it did not throw");
  }
}

TEST_CASE("the fp64 yardstick and the tensor-core bound catch a lost k step", "[cpu]") {
  // A 16-term dot product of ones is 16: exact. The bound at K = 513 still lets a correct fp32
  // accumulation through, and fails the same sum with the last 16 terms (a lost k step) missing.
  const int M = 3, N = 5, K = 513;
  Rng rng = Rng::for_test("lab04 yardstick");
  const std::vector<__half> A = to_half(rng.uniform_vector(M * K, -1.0f, 1.0f)), B = to_half(rng.uniform_vector(K * N, -1.0f, 1.0f));
  const Expected e = reference_hgemm(M, N, K, A, B);
  std::vector<float> fp32(static_cast<std::size_t>(M) * N), lost(fp32.size());
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      float s = 0, t = 0;
      for (int p = 0; p < K; ++p) {
        const float term = __half2float(A[i * K + p]) * __half2float(B[p * N + j]);
        s += term;
        if (p < K - 16) t += term;
      }
      fp32[i * N + j] = s;
      lost[i * N + j] = t;
    }
  }
  check_within(fp32, e.value, e.bound, "an fp32 accumulation is within the tensor-core bound");
  const gpulab::CompareResult r = gpulab::compare_within(lost, e.value, e.bound);
  check_fact(!r.ok(), "the same sums without the last 16 terms exceed it", "the bound would pass a lost k step: " + r.summary("lost"));
}

// ---------------------------------------------------------------------------------------------
// GPU (or the emulator): every rung against fp64
// ---------------------------------------------------------------------------------------------

namespace {

struct Shape {
  int M, N, K;
  bool misaligned;  ///< A, B and C one element past an aligned address: the launcher pads
};

/// Sizes that are not multiples of 16 (so the launcher pads), multiples that are not multiples of
/// a 128 × 128 × 32 block tile, a partial last k tile (K = 48, 528), K ≫ M, N, and one large
/// aligned product that takes the unpadded path.
const Shape kShapes[] = {
    {1, 1, 1, false},       {17, 31, 13, false},     {16, 16, 16, false},     {127, 129, 255, false}, {128, 128, 48, false},
    {144, 272, 528, false}, {129, 130, 33, true},    {7, 9, 1000, false},     {3, 260, 1027, true},   {260, 3, 21, false},
    {256, 256, 256, false}, {1000, 1003, 517, false}, {512, 384, 1024, false},
};

void check_rung(Rung rung) {
  std::string why;
  if (!lab04::rung_supported(rung, &why)) {
    gpulab::testing::not_run(std::string("hgemm ") + rung_name(rung), why);
    return;
  }
  for (const Shape& s : kShapes) {
    if (gpulab::testing::small_run() && static_cast<long long>(s.M) * s.N * s.K > 5'000'000) continue;
    const std::string what = std::string("hgemm ") + rung_name(rung) + " " + shape_text(s.M, s.N, s.K) + (s.misaligned ? " misaligned" : "");
    Rng rng = Rng::for_test("hgemm " + shape_text(s.M, s.N, s.K));
    const std::vector<__half> A = to_half(rng.uniform_vector(static_cast<std::size_t>(s.M) * s.K, -1.0f, 1.0f)),
                              B = to_half(rng.uniform_vector(static_cast<std::size_t>(s.K) * s.N, -1.0f, 1.0f));
    const int off = s.misaligned ? 1 : 0;
    // Misaligned runs place each matrix one element into its buffer; element 0 is a sentinel.
    std::vector<__half> hA(A.size() + off, __float2half_rn(-7.0f)), hB(B.size() + off, __float2half_rn(-7.0f));
    std::copy(A.begin(), A.end(), hA.begin() + off);
    std::copy(B.begin(), B.end(), hB.begin() + off);
    std::vector<float> hC(static_cast<std::size_t>(s.M) * s.N + off, kNaN);
    if (off) hC[0] = -7.0f;
    DeviceBuffer<__half> dA(hA), dB(hB);
    DeviceBuffer<float> dC(hC);
    lab04::hgemm(rung, s.M, s.N, s.K, dA.data() + off, dB.data() + off, dC.data() + off, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const Expected e = reference_hgemm(s.M, s.N, s.K, A, B);
    const std::vector<float> all = dC.download();
    const std::vector<float> got(all.begin() + off, all.end());
    check_within(got, e.value, e.bound, what,
                 "bound: 2*(K+2)*2^-23*(|A||B|)ij. NaN: an element never written, or (emulator) a cp.async destination read before "
                 "its group was waited for; errors along a 16-row or 8-column band: a fragment index off by one lane or register");
    if (off) check_fact(all[0] == -7.0f, what + ": the float before C untouched", "it was overwritten");
    check_guards(dC, "C");
    check_unmodified(dA, hA, "A");
    check_unmodified(dB, hB, "B");
  }
}

/// v2 and above stage tiles in shared memory: the kernels they launch (found by capturing the
/// launch at an aligned 256³, so the launcher does not pad) must declare some.
void check_uses_shared_memory(Rung rung) {
  if (!lab04::rung_supported(rung)) return;
  const int n = 256;
  DeviceBuffer<__half> A(n * n), B(n * n);
  DeviceBuffer<float> C(n * n);
  const nlohmann::json kernels = gpulab::testing::launched_kernels(
      [&](cudaStream_t s) { lab04::hgemm(rung, n, n, n, A.data(), B.data(), C.data(), s); });
  const std::string what = std::string("hgemm ") + rung_name(rung) + " stages tiles in shared memory";
  if (kernels.is_object()) {
    check_fact(false, what, kernels.value("error", std::string("?")), "launch every kernel on the stream hgemm() is given");
    return;
  }
  long long smem = 0;
  for (const auto& k : kernels) smem += k.value("static_smem_bytes", 0LL) + k.value("dynamic_smem_bytes", 0LL);
  check_fact(!kernels.empty() && smem >= 16384, what,
             "its kernels declare " + std::to_string(smem) + " bytes of shared memory (a 128 x 32 and a 32 x 128 tile of halves are 16 KB)",
             "stage each k step's tiles of A and B in __shared__ arrays and read the fragments from them");
}

}  // namespace

TEST_CASE("hgemm v1 wmma naive is right at awkward shapes", "[gpu]") { check_rung(Rung::kWmmaNaive); }
TEST_CASE("hgemm v2 wmma shared is right at awkward shapes", "[gpu][04.7]") {
  check_uses_shared_memory(Rung::kWmmaShared);
  check_rung(Rung::kWmmaShared);
}
TEST_CASE("hgemm v3 mma ldmatrix is right at awkward shapes", "[gpu][04.9]") {
  check_uses_shared_memory(Rung::kMmaLdmatrix);
  check_rung(Rung::kMmaLdmatrix);
}
TEST_CASE("hgemm v4 mma cp.async is right at awkward shapes", "[gpu][04.10]") {
  check_uses_shared_memory(Rung::kMmaPipelined);
  check_rung(Rung::kMmaPipelined);
}

// ---------------------------------------------------------------------------------------------
// GPU: the cuBLAS baseline, and speed
// ---------------------------------------------------------------------------------------------

namespace {

/// cublasGemmEx with fp16 inputs, fp32 output and fp32 compute, on row-major matrices (as
/// column-major Cᵀ = Bᵀ·Aᵀ: B goes first).
class Cublas {
 public:
  Cublas() { CUBLAS_CHECK(cublasCreate(&handle_)); }
  ~Cublas() { cublasDestroy(handle_); }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;
  void hgemm(int M, int N, int K, const __half* A, const __half* B, float* C, cudaStream_t s) {
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasSetStream(handle_, s));
    CUBLAS_CHECK(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_16F, N, A, CUDA_R_16F, K, &zero, C, CUDA_R_32F, N,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

 private:
  cublasHandle_t handle_ = nullptr;
};

/// n³ with n = 4096 (A and B 32 MiB each, C 64 MiB: more than any L2) where memory allows.
int perf_side() {
  std::size_t free_bytes = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  // A small run (the CPU emulator, the sanitizers) only checks the baseline's arithmetic: 512³.
  int n = gpulab::testing::small_run() ? 512 : 4096;
  while (n > 1024 && static_cast<std::size_t>(n) * n * 16 > free_bytes) n /= 2;
  return n;
}

/// Random A, B at n³, cuBLAS's C, and 512 sampled elements' fp64 values and |A||B|.
struct PerfProblem {
  int n = perf_side();
  std::size_t count = static_cast<std::size_t>(n) * n;
  Cublas cublas;
  DeviceBuffer<__half> A, B;
  DeviceBuffer<float> C, C_ref;
  std::vector<std::size_t> rows, cols;
  std::vector<double> exact, magnitude;
  std::vector<float> cublas_sample;
  double cublas_worst = 0;  ///< max |cuBLAS − exact| / |A||B| over the sample

  PerfProblem() : A(count), B(count), C(count), C_ref(count) {
    Rng rng = Rng::for_test("hgemm perf " + std::to_string(n));
    const std::vector<__half> a = to_half(rng.uniform_vector(count, -1.0f, 1.0f)), b = to_half(rng.uniform_vector(count, -1.0f, 1.0f));
    A.upload(a);
    B.upload(b);
    cublas.hgemm(n, n, n, A.data(), B.data(), C_ref.data(), nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> c = C_ref.download();
    Rng pick = Rng::for_test("hgemm sample");
    for (int s = 0; s < 512; ++s) {
      const std::size_t i = static_cast<std::size_t>(pick.integer(0, n - 1)), j = static_cast<std::size_t>(pick.integer(0, n - 1));
      double dot = 0, mag = 0;
      for (std::size_t k = 0; k < static_cast<std::size_t>(n); ++k) {
        const double p = static_cast<double>(__half2float(a[i * n + k])) * __half2float(b[k * n + j]);
        dot += p;
        mag += std::fabs(p);
      }
      rows.push_back(i);
      cols.push_back(j);
      exact.push_back(dot);
      magnitude.push_back(mag);
      cublas_sample.push_back(c[i * n + j]);
      cublas_worst = std::max(cublas_worst, std::fabs(c[i * n + j] - dot) / mag);
    }
  }

  /// The sampled elements of @p got against fp64: each within the tensor-core bound, and the worst
  /// relative error within 2× cuBLAS's worst plus u = 2⁻²³ (a floor, so that a lucky cuBLAS
  /// does not demand exactness).
  bool verify(const std::vector<float>& got, std::string& detail) const {
    double worst = 0;
    std::size_t over = 0;
    for (std::size_t s = 0; s < exact.size(); ++s) {
      const double v = got[rows[s] * n + cols[s]], err = std::fabs(v - exact[s]);
      if (!(err <= 2.0 * (n + 2.0) * kTensorCoreU * magnitude[s])) ++over;
      worst = std::max(worst, std::isnan(err) ? std::numeric_limits<double>::infinity() : err / magnitude[s]);
    }
    char text[200];
    std::snprintf(text, sizeof text, "512 sampled elements: worst error %.3g of |A||B| (cuBLAS %.3g; allowed %.3g); %zu over the bound", worst,
                  cublas_worst, 2 * cublas_worst + kTensorCoreU, over);
    detail = text;
    return over == 0 && worst <= 2 * cublas_worst + kTensorCoreU;
  }

  double tflops(double ms) const { return ms > 0 ? 2.0 * n * static_cast<double>(n) * n / (ms * 1e9) : 0.0; }
};

}  // namespace

TEST_CASE("cuBLAS fp16 GEMM baseline agrees with fp64", "[gpu]") {
  PerfProblem p;
  std::vector<float> all = p.C_ref.download();
  std::string detail;
  const bool ok = p.verify(all, detail);
  check_fact(ok && p.cublas_worst < 1e-5, "cublasGemmEx fp16 x fp16 -> fp32 " + shape_text(p.n, p.n, p.n) + " against fp64", detail,
             "the baseline must sum in fp32 (CUBLAS_COMPUTE_32F), not fp16");
}

namespace {

/// Verifies and times one rung; returns TFLOP/s (0 when wrong).
/// The measured peaks without the fp32 FMA peak: tensor cores are not bounded by it (an H200's
/// fp16 MMA runs ~10x past it), so "% of the fp32 peak" would mislead; cuBLAS is lab 04's ceiling.
nlohmann::json fp32_free(nlohmann::json peaks) {
  peaks.erase("peak_gflops");
  return peaks;
}

double measure_rung(PerfProblem& p, Rung rung, const gpulab::BenchOptions& options, bool record_check, gpulab::BenchResult* timed = nullptr) {
  p.C.fill(kNaN);
  lab04::hgemm(rung, p.n, p.n, p.n, p.A.data(), p.B.data(), p.C.data(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::string detail;
  const bool ok = p.verify(p.C.download(), detail);
  if (record_check) check_fact(ok, std::string("hgemm ") + rung_name(rung) + " " + shape_text(p.n, p.n, p.n) + " against fp64 (verified before timing)", detail);
  if (!ok) return 0.0;
  const gpulab::BenchResult b =
      gpulab::bench([&](cudaStream_t s) { lab04::hgemm(rung, p.n, p.n, p.n, p.A.data(), p.B.data(), p.C.data(), s); }, options);
  if (timed != nullptr) *timed = b;
  return p.tflops(b.median_ms);
}

void rung_speed(Rung rung, bool with_ladder) {
  std::string why;
  if (!lab04::rung_supported(rung, &why)) {
    gpulab::testing::not_run(std::string("hgemm ") + rung_name(rung) + " speed", why);
    return;
  }
  PerfProblem p;
  const double cublas =
      p.tflops(gpulab::bench([&](cudaStream_t s) { p.cublas.hgemm(p.n, p.n, p.n, p.A.data(), p.B.data(), p.C.data(), s); }).median_ms);
  gpulab::BenchResult timed;
  const double mine = measure_rung(p, rung, {}, true, &timed);
  if (mine <= 0.0) return;
  nlohmann::json extra = {{"n", p.n},
                          {"timing", timed.describe()},
                          {"peaks", fp32_free(gpulab::testing::peak_fields())},
                          {"kernels", gpulab::testing::launched_kernels([&](cudaStream_t s) {
                             lab04::hgemm(rung, p.n, p.n, p.n, p.A.data(), p.B.data(), p.C.data(), s);
                           })},
                          {"gpu_state", gpulab::testing::gpu_state_fields(timed)}};
  if (with_ladder) {
    gpulab::BenchOptions quick;
    quick.warmup_ms = 50;
    quick.min_samples = 3;
    quick.max_samples = 11;
    quick.budget_ms = 500;
    nlohmann::json rungs = nlohmann::json::array();
    std::string note = "ladder at " + shape_text(p.n, p.n, p.n) + ", % of cuBLAS fp16 " + std::to_string(static_cast<int>(cublas)) + " TFLOP/s:";
    for (int r = 1; r <= lab04::kRungs; ++r) {
      const Rung each = static_cast<Rung>(r);
      const double t = lab04::rung_supported(each) ? measure_rung(p, each, quick, false) : -1.0;
      rungs.push_back(nlohmann::json::array({rung_name(each), std::max(t, 0.0)}));
      char cell[48];
      std::snprintf(cell, sizeof cell, " v%d %s", r,
                    t < 0 ? "N/A" : t > 0 ? (std::to_string(static_cast<int>(100 * t / cublas + 0.5)) + "%").c_str() : "wrong");
      note += cell;
    }
    extra["rungs"] = rungs;
    extra["note"] = note;
  }
  gpulab::testing::record_performance("hgemm_v" + std::to_string(static_cast<int>(rung)), mine, "TFLOP/s", cublas, "cuBLAS fp16 GEMM (fp32 accumulate)",
                                      extra);
}

}  // namespace

TEST_CASE("hgemm v2 wmma shared speed", "[gpu][perf][04.7]") { rung_speed(Rung::kWmmaShared, false); }
TEST_CASE("hgemm v3 mma ldmatrix speed", "[gpu][perf][04.9]") { rung_speed(Rung::kMmaLdmatrix, false); }
TEST_CASE("hgemm v4 mma cp.async speed", "[gpu][perf][04.10]") { rung_speed(Rung::kMmaPipelined, true); }
