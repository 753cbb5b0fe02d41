/// @file test_gemm.cpp
/// @brief Lab 03 tests. On the CPU: the fp64 yardstick against products known in closed form,
/// and the tile arithmetic (03.1). On the GPU: every rung against fp64 at awkward shapes (with
/// alpha, beta, misaligned pointers, poisoned outputs and guard bands), the cuBLAS baseline
/// against fp64, the shared-memory structure of v3+, and each rung's speed against the same
/// reference rung and cuBLAS at 4096³, verified before timing.
#include <catch2/catch.hpp>
#include <cublas_v2.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "gemm.hpp"
#include "gpulab/bench.hpp"
#include "gpulab/check.hpp"
#include "gpulab/device.hpp"
#include "gpulab/device_buffer.hpp"
#include "gpulab/random.hpp"
#include "gpulab/report.hpp"
#include "gpulab_device_test.hpp"
#include "gpulab_test.hpp"
#include "reference_gemm.hpp"

using gpulab::DeviceBuffer;
using gpulab::Rng;
using gpulab::testing::check_fact;
using gpulab::testing::check_guards;
using gpulab::testing::check_result;
using gpulab::testing::check_within;
using gpulab::testing::check_unmodified;
using lab03::Rung;
using lab03::testing::reference_gemm;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

const char* rung_name(Rung r) {
  switch (r) {
    case Rung::kNaive: return "v1 naive";
    case Rung::kCoalesced: return "v2 coalesced";
    case Rung::kSharedTile: return "v3 shared tile";
    case Rung::kRegister1D: return "v4 1D registers";
    case Rung::kRegister2D: return "v5 2D registers";
    case Rung::kWarpTile: return "v6 warp tile";
  }
  return "?";
}

std::string shape_text(int M, int N, int K) {
  return std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// CPU: the yardstick itself, and the tile arithmetic
// ---------------------------------------------------------------------------------------------

TEST_CASE("fp64 reference reproduces known products", "[cpu]") {
  // A hand-worked 2×3 · 3×2 product, with alpha and beta.
  {
    const std::vector<float> A = {1, 2, 3, 4, 5, 6}, B = {7, 8, 9, 10, 11, 12}, C0 = {1, 1, 1, 1};
    const auto e = reference_gemm(2, 2, 3, 2.0, A, B, -1.0, C0);
    // A·B = [[58, 64], [139, 154]]; 2·AB − 1.
    const std::vector<double> want = {115, 127, 277, 307};
    check_fact(e.value == want, "reference: 2x3 times 3x2 with alpha = 2 and beta = -1", "values differ from [[115, 127], [277, 307]]");
  }
  // Ones (M×K) times a ramp B[k][j] = k + j: every element of row i is Σₖ (k + j) = K(K−1)/2 + K·j.
  {
    const int M = 5, N = 7, K = 300;
    std::vector<float> A(M * K, 1.0f), B(K * N);
    for (int k = 0; k < K; ++k) {
      for (int j = 0; j < N; ++j) B[k * N + j] = static_cast<float>(k + j);
    }
    const auto e = reference_gemm(M, N, K, 1.0, A, B, 0.0, {});
    bool ok = true;
    for (int i = 0; i < M; ++i) {
      for (int j = 0; j < N; ++j) ok = ok && e.value[i * N + j] == K * (K - 1) / 2.0 + static_cast<double>(K) * j;
    }
    check_fact(ok, "reference: ones times a ramp", "some element differs from K(K-1)/2 + K*j");
  }
  // The identity leaves B unchanged; beta = 0 ignores a C₀ full of NaN.
  {
    const int n = 33;
    std::vector<float> I(n * n, 0.0f), C0(n * n, kNaN);
    for (int i = 0; i < n; ++i) I[i * n + i] = 1.0f;
    const std::vector<float> B = Rng::for_test("identity").uniform_vector(n * n, -1.0f, 1.0f);
    const auto e = reference_gemm(n, n, n, 1.0, I, B, 0.0, C0);
    check_fact(std::equal(B.begin(), B.end(), e.value.begin()), "reference: identity times B with a NaN C0 and beta = 0",
               "I*B is not B, or C0 leaked in");
  }
  // The bound is tight enough to matter: a correctly rounded fp32 result passes, and the same
  // result with one term of one dot product dropped fails.
  {
    const int M = 40, N = 30, K = 517;
    Rng rng = Rng::for_test("bound");
    const std::vector<float> A = rng.uniform_vector(M * K, -1.0f, 1.0f), B = rng.uniform_vector(K * N, -1.0f, 1.0f);
    const auto e = reference_gemm(M, N, K, 1.0, A, B, 0.0, {});
    std::vector<float> rounded(e.value.begin(), e.value.end());
    check_within(rounded, e.value, e.bound, "reference: the fp64 product rounded to fp32 is within the bound");
    // Drop the largest term of C[7][11] (a random term can be tiny: |a·b| under the bound about
    // one time in twenty, which would make this check flaky rather than strict).
    int largest = 0;
    for (int k = 1; k < K; ++k) {
      if (std::fabs(A[7 * K + k] * B[k * N + 11]) > std::fabs(A[7 * K + largest] * B[largest * N + 11])) largest = k;
    }
    std::vector<float> dropped = rounded;
    dropped[7 * N + 11] -= A[7 * K + largest] * B[largest * N + 11];
    const auto r = gpulab::compare_within(dropped, e.value, e.bound);
    check_fact(!r.ok() && r.mismatches == 1, "reference: one dropped term exceeds the bound",
               "the bound would let a lost K remainder pass: " + r.summary("dropped"));
  }
}

TEST_CASE("plan_tiles counts tiles and waves and the tile intensity", "[cpu][03.1]") {
  struct Row {
    const char* what;
    int M, N, K, bm, bn, resident;
    long long tiles;
    int waves;
    double fill, intensity;
  };
  const Row rows[] = {
      // 4096² in 128 × 128 tiles on an H200 (132 SMs, one block each): 1024 tiles = 7 full waves
      // and a last one of 100 blocks.
      {"4096^2 in 128x128 tiles on 132 SMs", 4096, 4096, 4096, 128, 128, 132, 1024, 8, 100.0 / 132, 32.0},
      {"the same with two blocks per SM", 4096, 4096, 4096, 128, 128, 264, 1024, 4, 232.0 / 264, 32.0},
      {"32x32 tiles (lab v3)", 4096, 4096, 4096, 32, 32, 132 * 2, 16384, 63, 16384.0 / 264 - 62, 8.0},
      {"a ragged edge rounds up", 1000, 1003, 517, 128, 128, 132, 64, 1, 64.0 / 132, 32.0},
      {"one element", 1, 1, 1, 128, 128, 132, 1, 1, 1.0 / 132, 32.0},
      {"an exact fit", 256, 256, 64, 128, 128, 4, 4, 1, 1.0, 32.0},
      {"rectangular tiles (v4)", 4096, 4096, 4096, 64, 64, 132 * 4, 4096, 8, 4096.0 / 528 - 7, 64.0 * 64 / (2.0 * 128)},
      {"a skinny product", 64, 64, 100000, 128, 128, 132, 1, 1, 1.0 / 132, 32.0},
      {"one tile per slot plus one", 129, 128, 8, 128, 128, 1, 2, 2, 1.0, 32.0},
      // extreme sizes: M + bm - 1 overflows an int, and tiles do not fit in one
      {"M = 2^31 - 1 (rounding up must not overflow)", 2147483647, 1, 1, 128, 128, 132, 16777216, 127101, 16.0 / 132, 32.0},
      {"more than 2^31 tiles", 262144, 262144, 8, 2, 2, 1000, 17179869184LL, 17179870, 184.0 / 1000, 0.5},
      {"one block in flight", 3, 3, 3, 1, 1, 1, 9, 9, 1.0, 0.25},
  };
  for (const Row& r : rows) {
    const lab03::TilePlan p = lab03::plan_tiles(r.M, r.N, r.K, r.bm, r.bn, r.resident);
    char want[200], got[200];
    std::snprintf(want, sizeof want, "tiles %lld, waves %d, last wave %.3f full, intensity %.2f FLOP/B", r.tiles, r.waves, r.fill,
                  r.intensity);
    std::snprintf(got, sizeof got, "tiles %lld, waves %d, last wave %.3f full, intensity %.2f FLOP/B", p.tiles, p.waves,
                  p.last_wave_fill, p.intensity);
    const bool ok = p.tiles == r.tiles && p.waves == r.waves && std::fabs(p.last_wave_fill - r.fill) < 1e-9 &&
                    std::fabs(p.intensity - r.intensity) < 1e-9;
    check_fact(ok, std::string("plan_tiles: ") + r.what, std::string("got ") + got + "; want " + want,
               "tiles = ceil(M/bm)*ceil(N/bn); waves = ceil(tiles/resident); intensity = 2*bm*bn*K FLOP / (4*(bm+bn)*K) bytes");
  }
}

TEST_CASE("sgemm rejects sizes below 1", "[cpu]") {
  for (const auto& [M, N, K] : {std::array<int, 3>{0, 4, 4}, {4, 0, 4}, {4, 4, 0}, {-1, 4, 4}}) {
    bool threw = false;
    try {
      lab03::sgemm(Rung::kCoalesced, M, N, K, 1.0f, nullptr, nullptr, 0.0f, nullptr, nullptr);
    } catch (const std::invalid_argument&) {
      threw = true;
    }
    check_fact(threw, "sgemm " + shape_text(M, N, K) + " throws std::invalid_argument", "it did not throw",
               "check the sizes in the launcher before launching anything");
  }
}

// ---------------------------------------------------------------------------------------------
// GPU: every rung against fp64
// ---------------------------------------------------------------------------------------------

namespace {

struct Shape {
  int M, N, K;
  float alpha, beta;
  bool misaligned;  ///< pass A, B, C one float past a 16-byte boundary (no 128-bit access is legal)
};

/// The shapes of the issue (1³, 17×31×13, 127×129×255, 1000×1003×517, K ≫ M, N) and more: exact
/// tiles, one past a tile, a partial last K step for every BK in the lab, alpha and beta.
const Shape kShapes[] = {
    {1, 1, 1, 1.0f, 0.0f, false},         {17, 31, 13, 1.0f, 0.0f, false},      {127, 129, 255, 1.5f, -0.75f, false},
    {128, 128, 128, 1.0f, 0.0f, false},   {129, 130, 33, -1.0f, 2.0f, false},   {64, 256, 36, 1.0f, 1.0f, true},
    {7, 9, 5000, 1.0f, 0.0f, false},      {3, 260, 1027, 0.5f, 0.0f, true},     {260, 3, 21, 1.0f, 0.0f, false},
    {1000, 1003, 517, 1.0f, 0.0f, false}, {512, 384, 1024, 1.0f, 0.5f, false},
};

/// One shape's inputs and fp64 product, the same for every rung (so one process checking several
/// rungs computes each product once).
struct ShapeData {
  std::vector<float> A, B, C0;
  lab03::testing::Expected expected;
};

const ShapeData& shape_data(const Shape& s) {
  static std::map<std::string, ShapeData> cache;
  const std::string key = shape_text(s.M, s.N, s.K) + " " + std::to_string(s.alpha) + " " + std::to_string(s.beta);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Rng rng = Rng::for_test("sgemm " + key);
  ShapeData d;
  d.A = rng.uniform_vector(static_cast<std::size_t>(s.M) * s.K, -1.0f, 1.0f);
  d.B = rng.uniform_vector(static_cast<std::size_t>(s.K) * s.N, -1.0f, 1.0f);
  const std::size_t c_count = static_cast<std::size_t>(s.M) * s.N;
  // beta = 0: C holds NaN and must be ignored, as BLAS specifies; otherwise real values.
  d.C0 = s.beta == 0.0f ? std::vector<float>(c_count, kNaN) : rng.uniform_vector(c_count, -1.0f, 1.0f);
  d.expected = reference_gemm(s.M, s.N, s.K, s.alpha, d.A, d.B, s.beta, d.C0);
  return cache.emplace(key, std::move(d)).first->second;
}

void check_rung(Rung rung) {
  const std::string name = std::string("sgemm ") + rung_name(rung);
  for (const Shape& s : kShapes) {
    if (gpulab::testing::small_run() && static_cast<long long>(s.M) * s.N * s.K > 5'000'000) continue;
    const std::string what = name + " " + shape_text(s.M, s.N, s.K) + (s.misaligned ? " misaligned" : "") +
                             (s.alpha != 1.0f || s.beta != 0.0f ? " alpha=" + std::to_string(s.alpha).substr(0, 5) +
                                                                      " beta=" + std::to_string(s.beta).substr(0, 5)
                                                                : "");
    const ShapeData& d = shape_data(s);
    const std::vector<float>&A = d.A, &B = d.B, &C0 = d.C0;
    const int off = s.misaligned ? 1 : 0;
    // Misaligned runs place each matrix one float into its buffer; element 0 is a sentinel.
    auto with_offset = [&](const std::vector<float>& v) {
      std::vector<float> h(v.size() + off, -7.0f);
      std::copy(v.begin(), v.end(), h.begin() + off);
      return h;
    };
    const std::vector<float> hA = with_offset(A), hB = with_offset(B), hC = with_offset(C0);
    DeviceBuffer<float> dA(hA), dB(hB), dC(hC);
    lab03::sgemm(rung, s.M, s.N, s.K, s.alpha, dA.data() + off, dB.data() + off, s.beta, dC.data() + off, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const lab03::testing::Expected& e = d.expected;
    const std::vector<float> got_all = dC.download();
    const std::vector<float> got(got_all.begin() + off, got_all.end());
    check_within(got, e.value, e.bound, what,
                 "bound: 2*(K+2)*2^-24*(|alpha|*(|A||B|)ij + |beta|*|C0ij|). NaN: an element never written (or C read "
                 "when beta = 0); small errors everywhere: a lost K remainder or a stale tile (a missing __syncthreads)");
    if (off) check_fact(got_all[0] == -7.0f, what + ": the float before C untouched", "it was overwritten");
    check_guards(dC, "C");
    check_unmodified(dA, hA, "A");
    check_unmodified(dB, hB, "B");
  }
}

/// The kernels a rung launches for a small product, found by capturing the launch (nothing runs).
nlohmann::json rung_kernels(Rung rung, const float* A, const float* B, float* C, int n) {
  return gpulab::testing::launched_kernels([&](cudaStream_t s) { lab03::sgemm(rung, n, n, n, 1.0f, A, B, 0.0f, C, s); });
}

/// v3 and above stage tiles in shared memory: the attributes of the kernels they launch must say so.
void check_uses_shared_memory(Rung rung) {
  const int n = 256;
  DeviceBuffer<float> A(n * n), B(n * n), C(n * n);
  const nlohmann::json kernels = rung_kernels(rung, A.data(), B.data(), C.data(), n);
  const std::string what = std::string("sgemm ") + rung_name(rung) + " stages tiles in shared memory";
  if (kernels.is_object()) {
    check_fact(false, what, kernels.value("error", std::string("?")), "launch every kernel on the stream sgemm() is given");
    return;
  }
  long long smem = 0;
  std::string seen;
  for (const auto& k : kernels) {
    smem += k.value("static_smem_bytes", 0LL) + k.value("dynamic_smem_bytes", 0LL);
    seen += (seen.empty() ? "" : ", ") + k.value("name", std::string("?")) + ": " +
            std::to_string(k.value("static_smem_bytes", 0LL) + k.value("dynamic_smem_bytes", 0LL)) + " B";
  }
  check_fact(!kernels.empty() && smem > 0, what,
             kernels.empty() ? "sgemm launched no kernel" : "its kernels declare no shared memory (" + seen + ")",
             "declare __shared__ tiles of A and B and read the inner loop's operands from them");
}

}  // namespace

TEST_CASE("sgemm v1 naive is right at awkward shapes", "[gpu]") { check_rung(Rung::kNaive); }
TEST_CASE("sgemm v2 coalesced is right at awkward shapes", "[gpu][03.2]") { check_rung(Rung::kCoalesced); }
TEST_CASE("sgemm v3 shared tile is right at awkward shapes", "[gpu][03.3]") {
  check_uses_shared_memory(Rung::kSharedTile);
  check_rung(Rung::kSharedTile);
}
TEST_CASE("sgemm v4 1D registers is right at awkward shapes", "[gpu][03.4]") {
  check_uses_shared_memory(Rung::kRegister1D);
  check_rung(Rung::kRegister1D);
}
TEST_CASE("sgemm v5 2D registers is right at awkward shapes", "[gpu][03.5]") {
  check_uses_shared_memory(Rung::kRegister2D);
  check_rung(Rung::kRegister2D);
}
TEST_CASE("sgemm v6 warp tile is right at awkward shapes", "[gpu][03.6][stretch]") {
  check_uses_shared_memory(Rung::kWarpTile);
  check_rung(Rung::kWarpTile);
}

// ---------------------------------------------------------------------------------------------
// GPU: the cuBLAS baseline, itself checked
// ---------------------------------------------------------------------------------------------

namespace {

/// cuBLAS SGEMM in fp32 (no TF32: the default math mode computes in the requested precision) on
/// row-major matrices: cuBLAS is column-major, and a row-major C = A·B is the column-major
/// Cᵀ = Bᵀ·Aᵀ, so B goes first.
class Cublas {
 public:
  Cublas() {
    CUBLAS_CHECK(cublasCreate(&handle_));
    // The default math mode computes fp32 in fp32 (TF32 only when asked for, or when
    // NVIDIA_TF32_OVERRIDE says so: the grader sets it to 0). Checked: a failure here would make the
    // baseline silently something else.
    CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
  }
  ~Cublas() { cublasDestroy(handle_); }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;

  void sgemm(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C, cudaStream_t s) {
    CUBLAS_CHECK(cublasSetStream(handle_, s));
    CUBLAS_CHECK(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, B, N, A, K, &beta, C, N));
  }

 private:
  cublasHandle_t handle_ = nullptr;
};

/// The performance problem: n³ with n = 4096 (three 64 MiB matrices, larger than any L2 of today)
/// where memory allows, else smaller.
int perf_side() {
  std::size_t free_bytes = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  int n = 4096;
  while (n > 1024 && static_cast<std::size_t>(n) * n * sizeof(float) * 8 > free_bytes) n /= 2;
  return n;
}

/// Everything a performance case needs, made once per process: random A and B, cuBLAS's C and
/// |A|·|B| (for the elementwise bound) at n³.
struct PerfProblem {
  int n = perf_side();
  std::size_t count = static_cast<std::size_t>(n) * n;
  Cublas cublas;
  DeviceBuffer<float> A, B, C, C_ref, magnitude;
  std::vector<float> c_ref, bound_base;

  PerfProblem() : A(count), B(count), C(count), C_ref(count), magnitude(count) {
    Rng rng = Rng::for_test("sgemm perf " + std::to_string(n));
    const std::vector<float> a = rng.uniform_vector(count, -1.0f, 1.0f), b = rng.uniform_vector(count, -1.0f, 1.0f);
    A.upload(a);
    B.upload(b);
    cublas.sgemm(n, n, n, 1.0f, A.data(), B.data(), 0.0f, C_ref.data(), nullptr);
    std::vector<float> abs_a(count), abs_b(count);
    std::transform(a.begin(), a.end(), abs_a.begin(), [](float v) { return std::fabs(v); });
    std::transform(b.begin(), b.end(), abs_b.begin(), [](float v) { return std::fabs(v); });
    DeviceBuffer<float> dabs_a(abs_a), dabs_b(abs_b);
    cublas.sgemm(n, n, n, 1.0f, dabs_a.data(), dabs_b.data(), 0.0f, magnitude.data(), nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    c_ref = C_ref.download();
    bound_base = magnitude.download();
  }

  /// Checks C against cuBLAS: both are within the bound of the exact product, so within twice it
  /// of each other.
  gpulab::CompareResult verify(const std::vector<float>& got) const {
    const double scale = 2.0 * lab03::testing::kBoundFactor * (n + 2.0) * gpulab::kFp32UnitRoundoff * (1.0 + 1e-3);
    std::vector<double> want(c_ref.begin(), c_ref.end()), bound(count);
    for (std::size_t i = 0; i < count; ++i) bound[i] = scale * bound_base[i];
    return gpulab::compare_within(got, want, bound);
  }

  double gflops(double ms) const { return ms > 0 ? 2.0 * n * static_cast<double>(n) * n / (ms * 1e6) : 0.0; }
};

}  // namespace

TEST_CASE("cuBLAS SGEMM baseline agrees with fp64 and is not TF32", "[gpu]") {
  // The baseline is only a yardstick if it computes the same thing in the same precision: check
  // a sample of its elements against fp64, elementwise and normwise. TF32 (10-bit mantissas)
  // would be ~100x further from fp64 than fp32 at n = 4096 (normwise ~5e-4 against ~2e-6).
  PerfProblem p;
  const std::vector<float> a = p.A.download(), b = p.B.download();
  Rng pick = Rng::for_test("cublas sample");
  const int samples = 512;
  std::vector<float> got;
  std::vector<double> want, bound;
  double err2 = 0.0, ref2 = 0.0;
  for (int s = 0; s < samples; ++s) {
    const std::size_t i = static_cast<std::size_t>(pick.integer(0, p.n - 1)), j = static_cast<std::size_t>(pick.integer(0, p.n - 1));
    double dot = 0.0, mag = 0.0;
    for (std::size_t k = 0; k < static_cast<std::size_t>(p.n); ++k) {
      dot += static_cast<double>(a[i * p.n + k]) * b[k * p.n + j];
      mag += std::fabs(static_cast<double>(a[i * p.n + k]) * b[k * p.n + j]);
    }
    const float c = p.c_ref[i * p.n + j];
    got.push_back(c);
    want.push_back(dot);
    bound.push_back(lab03::testing::kBoundFactor * (p.n + 2.0) * gpulab::kFp32UnitRoundoff * mag);
    err2 += (c - dot) * (c - dot);
    ref2 += dot * dot;
  }
  check_within(got, want, bound, "cuBLAS SGEMM " + shape_text(p.n, p.n, p.n) + " (512 sampled elements) against fp64");
  const double rel = std::sqrt(err2 / ref2);
  char detail[160];
  std::snprintf(detail, sizeof detail, "normwise relative error %.2e on the sample (fp32 expected below 2e-5; TF32 near 5e-4)", rel);
  check_fact(rel < 2e-5, "cuBLAS SGEMM computes in fp32 (not TF32)", detail,
             "unset NVIDIA_TF32_OVERRIDE and any cuBLAS TF32 math mode: the baseline must be plain fp32");
}

// ---------------------------------------------------------------------------------------------
// GPU: speed. Each case verifies its rung at n³ against cuBLAS, then times the rung and cuBLAS
// in the same process; the grader compares the learner's fraction of cuBLAS with the reference's.
// ---------------------------------------------------------------------------------------------

namespace {

/// Verifies and times one rung; returns GFLOP/s (0 when wrong).
double measure_rung(PerfProblem& p, Rung rung, const gpulab::BenchOptions& options, bool record_check, gpulab::BenchResult* timed = nullptr) {
  p.C.fill(kNaN);
  lab03::sgemm(rung, p.n, p.n, p.n, 1.0f, p.A.data(), p.B.data(), 0.0f, p.C.data(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const gpulab::CompareResult r = p.verify(p.C.download());
  if (record_check) {
    check_result(r, std::string("sgemm ") + rung_name(rung) + " " + shape_text(p.n, p.n, p.n) + " against cuBLAS (verified before timing)");
  }
  if (!r.ok()) return 0.0;
  const gpulab::BenchResult b = gpulab::bench(
      [&](cudaStream_t s) { lab03::sgemm(rung, p.n, p.n, p.n, 1.0f, p.A.data(), p.B.data(), 0.0f, p.C.data(), s); }, options);
  if (timed != nullptr) *timed = b;
  return p.gflops(b.median_ms);
}

void rung_speed(Rung rung, bool with_ladder) {
  PerfProblem p;
  const double cublas = p.gflops(
      gpulab::bench([&](cudaStream_t s) { p.cublas.sgemm(p.n, p.n, p.n, 1.0f, p.A.data(), p.B.data(), 0.0f, p.C.data(), s); })
          .median_ms);
  gpulab::BenchResult timed;
  const double mine = measure_rung(p, rung, {}, true, &timed);
  if (mine <= 0.0) return;  // wrong: reported above, nothing to time
  nlohmann::json extra = {{"n", p.n},
                          {"timing", timed.describe()},
                          {"flops_per_byte", 2.0 * p.n / (3.0 * sizeof(float))},  // compulsory traffic: A, B, C once
                          {"peaks", gpulab::testing::peak_fields()},
                          {"kernels", rung_kernels(rung, p.A.data(), p.B.data(), p.C.data(), p.n)},
                          {"gpu_state", gpulab::testing::gpu_state_fields(timed)}};
  if (with_ladder) {
    // Every rung once more, briefly, for the ladder table and chart (each is verified first; a
    // wrong rung shows as 0).
    gpulab::BenchOptions quick;
    quick.warmup_ms = 50;
    quick.min_samples = 3;
    quick.max_samples = 11;
    quick.budget_ms = 500;
    nlohmann::json rungs = nlohmann::json::array();
    std::string note = "ladder at " + shape_text(p.n, p.n, p.n) + ", % of cuBLAS " + std::to_string(static_cast<int>(cublas)) + " GFLOP/s:";
    for (int r = 1; r <= lab03::kRungs; ++r) {
      const double g = measure_rung(p, static_cast<Rung>(r), quick, false);
      rungs.push_back(nlohmann::json::array({rung_name(static_cast<Rung>(r)), g}));
      char cell[48];
      std::snprintf(cell, sizeof cell, " v%d %s", r, g > 0 ? (std::to_string(static_cast<int>(100 * g / cublas + 0.5)) + "%").c_str() : "wrong");
      note += cell;
    }
    extra["rungs"] = rungs;
    extra["note"] = note;
  }
  gpulab::testing::record_performance(std::string("sgemm_v") + std::to_string(static_cast<int>(rung)), mine, "GFLOP/s", cublas,
                                      "cuBLAS SGEMM (fp32)", extra);
}

}  // namespace

TEST_CASE("sgemm v2 coalesced speed", "[gpu][perf][03.2]") { rung_speed(Rung::kCoalesced, false); }
TEST_CASE("sgemm v3 shared tile speed", "[gpu][perf][03.3]") { rung_speed(Rung::kSharedTile, false); }
TEST_CASE("sgemm v4 1D registers speed", "[gpu][perf][03.4]") { rung_speed(Rung::kRegister1D, false); }
TEST_CASE("sgemm v5 2D registers speed", "[gpu][perf][03.5]") { rung_speed(Rung::kRegister2D, true); }
TEST_CASE("sgemm v6 warp tile speed", "[gpu][perf][03.6][stretch]") { rung_speed(Rung::kWarpTile, false); }
