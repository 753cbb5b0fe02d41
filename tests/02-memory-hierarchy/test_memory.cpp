/// @file test_memory.cpp
/// @brief Lab 02 tests: bank arithmetic on the CPU; transposes (bitwise), sums (bounded by the
/// arithmetic, exact on integers), histograms (exact counts) on the GPU at awkward sizes with
/// poisoned outputs, guard bands and several block sizes; bandwidth records for the grader;
/// and the stride sweep the lesson discusses.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gpulab/bench.hpp"
#include "gpulab/check.hpp"
#include "gpulab/device.hpp"
#include "gpulab/device_buffer.hpp"
#include "gpulab/random.hpp"
#include "gpulab/report.hpp"
#include "gpulab_device_test.hpp"
#include "gpulab_test.hpp"
#include "memory.hpp"

using gpulab::DeviceBuffer;
using gpulab::Rng;
using gpulab::testing::check_fact;
using gpulab::testing::check_guards;
using gpulab::testing::check_within;
using gpulab::testing::check_bitwise;
using gpulab::testing::check_unmodified;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

std::array<std::uint32_t, 32> lanes(const std::function<std::uint32_t(std::uint32_t)>& word_of) {
  std::array<std::uint32_t, 32> a{};
  for (std::uint32_t lane = 0; lane < 32; ++lane) a[lane] = word_of(lane);
  return a;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// 02.1: bank conflicts (CPU)
// ---------------------------------------------------------------------------------------------

TEST_CASE("bank_conflict_ways counts distinct words per bank", "[cpu][02.1]") {
  struct Row {
    const char* pattern;
    std::array<std::uint32_t, 32> words;
    int want;
  };
  const Row rows[] = {
      {"consecutive words", lanes([](std::uint32_t l) { return l; }), 1},
      {"every lane the same word (broadcast)", lanes([](std::uint32_t) { return 7u; }), 1},
      {"stride 2", lanes([](std::uint32_t l) { return 2 * l; }), 2},
      {"stride 4", lanes([](std::uint32_t l) { return 4 * l; }), 4},
      {"stride 32 (a column of a 32 x 32 tile)", lanes([](std::uint32_t l) { return 32 * l; }), 32},
      {"stride 33 (a column of a 32 x 33 tile)", lanes([](std::uint32_t l) { return 33 * l + 5; }), 1},
      {"pairs of lanes on one word", lanes([](std::uint32_t l) { return l / 2; }), 1},
      {"two words in bank 0 and broadcasts", lanes([](std::uint32_t l) { return l < 16 ? 0u : 32u; }), 2},
      {"stride 3 with an offset", lanes([](std::uint32_t l) { return 3 * l + 100; }), 1},
      {"stride 16", lanes([](std::uint32_t l) { return 16 * l; }), 16},
      // duplicates that are not neighbours: two words of bank 0, alternating lane by lane
      {"two words of one bank alternating", lanes([](std::uint32_t l) { return l % 2 ? 32u : 0u; }), 2},
      {"four words of one bank, each read by 8 lanes", lanes([](std::uint32_t l) { return 32u * (l % 4); }), 4},
      // words at the top of the 32-bit range (no table indexed by word, no overflow in 4 · word)
      {"consecutive words near 2^32", lanes([](std::uint32_t l) { return 0xFFFFFFE0u + l; }), 1},
      {"stride 32 near 2^32", lanes([](std::uint32_t l) { return 0xFFFFFFFFu - 32u * l; }), 32},
      {"the last lane alone on a busy bank", lanes([](std::uint32_t l) { return l == 31 ? 64u : (l < 16 ? 0u : 32u); }), 3},
  };
  for (const Row& r : rows) {
    const int got = lab02::bank_conflict_ways(r.words);
    check_fact(got == r.want, std::string("bank_conflict_ways: ") + r.pattern,
               "got " + std::to_string(got) + "-way, want " + std::to_string(r.want) + "-way",
               "bank = word mod 32; count *distinct* words per bank (lanes on the same word share a broadcast)");
  }
}

// ---------------------------------------------------------------------------------------------
// 02.2 – 02.4: transposes (GPU), checked bitwise
// ---------------------------------------------------------------------------------------------

namespace {
using TransposeFn = void (*)(const float*, float*, int, int, cudaStream_t);

void check_transpose(TransposeFn fn, const std::string& name) {
  const std::pair<int, int> shapes[] = {{1, 1},    {1, 1000}, {1000, 1}, {17, 31},  {32, 32},
                                        {33, 65},  {31, 33},  {257, 129}, {1000, 1003}, {4097, 2},
                                        {2, 4099}, {3, 70001}};
  for (const auto& [rows, cols] : shapes) {
    if (gpulab::testing::small_run() && static_cast<long long>(rows) * cols > 100000) continue;
    Rng rng = Rng::for_test(name + "/" + std::to_string(rows) + "x" + std::to_string(cols));
    const std::size_t count = static_cast<std::size_t>(rows) * cols;
    const std::vector<float> in = rng.uniform_vector(count, -1e3f, 1e3f);
    DeviceBuffer<float> din(in), dout(count);
    dout.fill(kNaN);
    fn(din.data(), dout.data(), rows, cols, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> want(count);
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < cols; ++c) want[static_cast<std::size_t>(c) * rows + r] = in[static_cast<std::size_t>(r) * cols + c];
    }
    check_bitwise(dout.download(), want, name + " " + std::to_string(rows) + "x" + std::to_string(cols),
                 "out[c][r] = in[r][c], with out having `rows` columns; test both bounds of the tile (r < rows, c < cols)");
    check_guards(dout, "out");
    check_unmodified(din, in, "in");
  }
}
}  // namespace

TEST_CASE("transpose_naive refuses more rows than its grid can hold", "[cpu]") {
  // Given code, checked so that the limit the header states holds: 8 rows per block, gridDim.y ≤ 65535.
  bool threw = false;
  try {
    lab02::transpose_naive(nullptr, nullptr, 65535 * 8 + 1, 1, nullptr);
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  check_fact(threw, "transpose_naive with 524 281 rows throws std::invalid_argument", threw ? "threw" : "did not throw",
             "gridDim.y is at most 65535");
}

TEST_CASE("transpose_naive is exact on awkward shapes", "[gpu][02.2]") { check_transpose(&lab02::transpose_naive, "transpose_naive"); }
TEST_CASE("transpose_tiled is exact on awkward shapes", "[gpu][02.3]") { check_transpose(&lab02::transpose_tiled, "transpose_tiled"); }
TEST_CASE("transpose_padded is exact on awkward shapes", "[gpu][02.4]") { check_transpose(&lab02::transpose_padded, "transpose_padded"); }

// ---------------------------------------------------------------------------------------------
// 02.5 – 02.8: sums (GPU)
// ---------------------------------------------------------------------------------------------

namespace {
const char* rung_name(lab02::SumRung rung) {
  switch (rung) {
    case lab02::SumRung::kDivergent: return "divergent";
    case lab02::SumRung::kSequential: return "sequential";
    case lab02::SumRung::kShuffle: return "shuffle";
    case lab02::SumRung::kGridStride: return "grid-stride";
  }
  return "?";
}

/// One reduce_sum on the GPU; returns the result read back.
float run_sum(lab02::SumRung rung, const std::vector<float>& x, int threads) {
  DeviceBuffer<float> dx(x), scratch(lab02::reduce_scratch_floats(x.size())), result(1);
  result.fill(kNaN);
  lab02::reduce_sum(rung, dx.data(), x.size(), threads, scratch.data(), result.data(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  check_guards(result, "result");
  check_guards(scratch, "scratch");
  check_unmodified(dx, x, "x");
  return result.download()[0];
}

void check_sum_rung(lab02::SumRung rung) {
  const std::string name = std::string("reduce_sum ") + rung_name(rung);
  const std::size_t sizes[] = {1, 2, 31, 32, 33, 255, 256, 257, 1023, 65537, (1u << 20) + 3, (1u << 21) - 1};
  for (int threads : {64, 256, 1024}) {
    for (std::size_t n : sizes) {
      if (gpulab::testing::small_run() && (n > 65537 || threads == 64)) continue;
      const std::string what = name + " n=" + std::to_string(n) + " threads=" + std::to_string(threads);
      Rng rng = Rng::for_test(what);
      // Integer-valued inputs, |x| ≤ 8 and n < 2²¹: every partial sum is an integer below 2²⁴,
      // so any order of addition is exact. One element dropped or counted twice shows.
      const std::vector<float> ints = rng.integer_vector(n, -8, 8);
      double exact = 0.0;
      for (float v : ints) exact += v;
      const float got_int = run_sum(rung, ints, threads);
      check_fact(static_cast<double>(got_int) == exact, what + " (integers)",
                 "got " + std::to_string(got_int) + ", want exactly " + std::to_string(exact),
                 "every element exactly once: check the bounds test (i < n) and that every block's partial is summed");
      // Real inputs: the bound of a sum whose longest chain of sequential additions is at most
      // L = 4096 + log2 n terms: |S − Σx| ≤ L·u·Σ|x|.
      const std::vector<float> reals = rng.uniform_vector(n, -1.0f, 1.0f);
      double sum = 0.0, magnitude = 0.0;
      for (float v : reals) {
        sum += v;
        magnitude += std::fabs(v);
      }
      const double chain = std::min<double>(static_cast<double>(n), 4096.0 + std::log2(static_cast<double>(n)) + 1.0);
      const double bound = chain * gpulab::kFp32UnitRoundoff * magnitude;
      const float got = run_sum(rung, reals, threads);
      check_within({got}, {sum}, {bound}, what + " (reals)",
                   "a NaN means the result was never written; a large error means elements were lost");
    }
  }
}
}  // namespace

TEST_CASE("reduce_sum divergent tree", "[gpu][02.5]") { check_sum_rung(lab02::SumRung::kDivergent); }
TEST_CASE("reduce_sum sequential tree", "[gpu][02.6]") { check_sum_rung(lab02::SumRung::kSequential); }
TEST_CASE("reduce_sum warp shuffles", "[gpu][02.7]") { check_sum_rung(lab02::SumRung::kShuffle); }
TEST_CASE("reduce_sum grid-stride", "[gpu][02.8]") { check_sum_rung(lab02::SumRung::kGridStride); }

// Given code: reduce_sum answers n = 0 itself, before any rung's kernel, so no TODO is credited here.
TEST_CASE("reduce_sum of nothing is zero", "[gpu]") {
  for (auto rung : {lab02::SumRung::kDivergent, lab02::SumRung::kSequential, lab02::SumRung::kShuffle, lab02::SumRung::kGridStride}) {
    DeviceBuffer<float> x(0), scratch(lab02::reduce_scratch_floats(0)), result(1);
    result.fill(kNaN);
    lab02::reduce_sum(rung, x.data(), 0, 256, scratch.data(), result.data(), nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const float got = result.download()[0];
    check_fact(got == 0.0f, std::string("reduce_sum ") + rung_name(rung) + " n=0", "got " + std::to_string(got), "the empty sum is 0");
  }
}

// ---------------------------------------------------------------------------------------------
// 02.9 and 02.10: histograms (GPU), exact counts
// ---------------------------------------------------------------------------------------------

namespace {
using HistogramFn = void (*)(const std::uint8_t*, std::size_t, unsigned int*, cudaStream_t);

void check_histogram(HistogramFn fn, const std::string& name) {
  const std::size_t sizes[] = {0, 1, 255, 1000, 65537, (1u << 22) + 7};
  const char* kinds[] = {"uniform", "all one value", "two values"};
  for (std::size_t n : sizes) {
    if (gpulab::testing::small_run() && n > 65537) continue;
    for (int kind = 0; kind < 3; ++kind) {
     // The data may start anywhere: at a 256-byte boundary, or 3 bytes past one (a kernel that
     // reads wide words must count the bytes before the first boundary and after the last word).
     for (std::size_t offset : {std::size_t{0}, std::size_t{3}}) {
      if (offset > 0 && (n < 255 || kind != 0)) continue;
      Rng rng = Rng::for_test(name + std::to_string(n) + kinds[kind] + std::to_string(offset));
      std::vector<std::uint8_t> data(n + offset);
      for (auto& b : data) {
        b = kind == 0 ? static_cast<std::uint8_t>(rng.integer(0, 255))
                      : kind == 1 ? std::uint8_t{200} : static_cast<std::uint8_t>(rng.integer(0, 1) ? 3 : 250);
      }
      std::vector<unsigned int> want(lab02::kBins, 0);
      for (std::size_t i = offset; i < data.size(); ++i) ++want[data[i]];
      DeviceBuffer<std::uint8_t> ddata(data);
      DeviceBuffer<unsigned int> bins(lab02::kBins);
      bins.fill_bytes(0xAB);  // the function must set every bin, not only add to it
      fn(ddata.data() + offset, n, bins.data(), nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      check_bitwise(bins.download(), want,
                   name + " n=" + std::to_string(n) + " " + kinds[kind] + (offset ? " at an odd address" : ""),
                   "bins start at zero (the function sets them); every byte adds exactly one (atomicAdd)");
      check_guards(bins, "bins");
      check_unmodified(ddata, data, "data");
     }
    }
  }
}
}  // namespace

TEST_CASE("histogram_global counts exactly", "[gpu][02.9]") { check_histogram(&lab02::histogram_global, "histogram_global"); }
TEST_CASE("histogram_shared counts exactly", "[gpu][02.10]") { check_histogram(&lab02::histogram_shared, "histogram_shared"); }

// ---------------------------------------------------------------------------------------------
// Performance: measured here, judged by the grader against the reference and cudaMemcpy.
// ---------------------------------------------------------------------------------------------

namespace {
double memcpy_gbs_for(std::size_t bytes) { return gpulab::measure_d2d_memcpy_gbs(bytes); }

/// The side of a square float matrix for a transpose test: 16384² (1 GiB) where memory allows.
int transpose_side() {
  const std::size_t per_array = gpulab::bandwidth_problem_elements(sizeof(float), 4);
  int side = 16384;
  while (static_cast<std::size_t>(side) * side > per_array && side > 1024) side /= 2;
  return side;
}

/// How many of a sample of elements (every 9973rd) @p fn transposes wrong: one untimed call,
/// checked bit for bit, so that a speed is only taken of a kernel that transposes.
std::size_t sampled_wrong(TransposeFn fn, const std::vector<float>& in, const DeviceBuffer<float>& din, DeviceBuffer<float>& dout, int side) {
  dout.fill(std::numeric_limits<float>::quiet_NaN());
  fn(din.data(), dout.data(), side, side, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> out = dout.download();
  const std::size_t count = static_cast<std::size_t>(side) * side;
  std::size_t wrong = 0;
  for (std::size_t k = 0; k < count; k += 9973) {
    const std::size_t r = k / side, c = k % side;
    wrong += std::memcmp(&out[c * side + r], &in[k], sizeof(float)) != 0;
  }
  return wrong;
}

double transpose_gbs(TransposeFn fn, const DeviceBuffer<float>& in, DeviceBuffer<float>& out, int side,
                     gpulab::BenchResult* timed = nullptr) {
  const gpulab::BenchResult r = gpulab::bench([&](cudaStream_t s) { fn(in.data(), out.data(), side, side, s); });
  if (timed != nullptr) *timed = r;
  return gpulab::gb_per_s(2.0 * sizeof(float) * side * static_cast<double>(side), r.median_ms);  // read + write
}
}  // namespace

TEST_CASE("transpose bandwidth", "[gpu][perf]") {
  const int side = transpose_side();
  const std::size_t count = static_cast<std::size_t>(side) * side;
  Rng rng = Rng::for_test("transpose perf");
  const std::vector<float> in = rng.uniform_vector(count);
  DeviceBuffer<float> din(in), dout(count);
  const std::size_t wrong = sampled_wrong(&lab02::transpose_padded, in, din, dout, side);  // verified before timing
  check_fact(wrong == 0, "transpose_padded " + std::to_string(side) + "^2 (verified before timing)",
             std::to_string(wrong) + " sampled elements wrong");
  if (wrong != 0) return;  // no speed for a kernel that does not transpose
  const double naive = transpose_gbs(&lab02::transpose_naive, din, dout, side);
  const double tiled = transpose_gbs(&lab02::transpose_tiled, din, dout, side);
  gpulab::BenchResult timed;
  const double padded = transpose_gbs(&lab02::transpose_padded, din, dout, side, &timed);
  char note[200];
  std::snprintf(note, sizeof note, "rungs: naive %.0f GB/s, tiled %.0f GB/s, padded %.0f GB/s (padded/tiled %.2fx)",
                naive, tiled, padded, tiled > 0 ? padded / tiled : 0.0);
  gpulab::testing::record_performance("transpose_padded", padded, "GB/s", memcpy_gbs_for(count * sizeof(float)), "D2D cudaMemcpy",
                                      {{"side", side}, {"naive_gbs", naive}, {"tiled_gbs", tiled}, {"note", note}, {"timing", timed.describe()},
                                       {"kernels", gpulab::testing::launched_kernels([&](cudaStream_t s) {
                                          lab02::transpose_padded(din.data(), dout.data(), side, side, s);
                                        })},
                                       {"rungs", nlohmann::json::array({nlohmann::json::array({"naive", naive}),
                                                                        nlohmann::json::array({"tiled", tiled}),
                                                                        nlohmann::json::array({"padded", padded})})},
                                       {"gpu_state", gpulab::testing::gpu_state_fields(timed)}});
}

TEST_CASE("padding beats the unpadded tile", "[gpu][timing][02.3][02.4]") {
  // The point of 02.4: the same tile without bank conflicts must be measurably faster. The
  // margin (5 %) is far below the gap the lesson predicts (on an H200: 42 % vs 83 % of memcpy).
  const int side = transpose_side();
  const std::size_t count = static_cast<std::size_t>(side) * side;
  const std::vector<float> in = Rng::for_test("padding").uniform_vector(count);
  DeviceBuffer<float> din(in), dout(count);
  const std::size_t wrong_tiled = sampled_wrong(&lab02::transpose_tiled, in, din, dout, side),
                    wrong_padded = sampled_wrong(&lab02::transpose_padded, in, din, dout, side);
  check_fact(wrong_tiled == 0 && wrong_padded == 0, "transpose_tiled and transpose_padded transpose (verified before timing)",
             std::to_string(wrong_tiled) + " and " + std::to_string(wrong_padded) + " sampled elements wrong",
             "no race without the right values: an empty kernel is the fastest of all");
  if (wrong_tiled != 0 || wrong_padded != 0) return;
  const double tiled = transpose_gbs(&lab02::transpose_tiled, din, dout, side);
  const double padded = transpose_gbs(&lab02::transpose_padded, din, dout, side);
  check_fact(padded >= 1.05 * tiled, "transpose_padded beats transpose_tiled",
             "padded " + std::to_string(padded) + " GB/s, tiled " + std::to_string(tiled) + " GB/s (need at least 1.05x)",
             "pad the tile's rows to 33 floats, so a column read hits 32 different banks");
}

TEST_CASE("reduction bandwidth", "[gpu][perf]") {
  const std::size_t n = gpulab::bandwidth_problem_elements(sizeof(float), 2);
  Rng rng = Rng::for_test("reduction perf");
  const std::vector<float> x = rng.integer_vector(n, -1, 1);  // small values: the sum stays far from fp32 overflow
  DeviceBuffer<float> dx(x), scratch(lab02::reduce_scratch_floats(n)), result(1);
  lab02::reduce_sum(lab02::SumRung::kGridStride, dx.data(), n, 256, scratch.data(), result.data(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  double exact = 0.0, magnitude = 0.0;
  for (float v : x) {
    exact += v;
    magnitude += std::fabs(v);
  }
  const double bound = (4096.0 + std::log2(static_cast<double>(n)) + 1.0) * gpulab::kFp32UnitRoundoff * magnitude;
  check_within(result.download(), {exact}, {bound}, "reduce_sum grid-stride (verified before timing)");
  const gpulab::BenchResult r = gpulab::bench([&](cudaStream_t s) {
    lab02::reduce_sum(lab02::SumRung::kGridStride, dx.data(), n, 256, scratch.data(), result.data(), s);
  });
  // Bytes read: the lesson's convention for reductions (it may exceed the read + write figure
  // of a copy, which counts both directions).
  const double gbs = gpulab::gb_per_s(static_cast<double>(n) * sizeof(float), r.median_ms);
  gpulab::testing::record_performance("reduce_grid_stride", gbs, "GB/s read", memcpy_gbs_for(n * sizeof(float)), "D2D cudaMemcpy",
                                      {{"elements", n}, {"flops_per_byte", 0.25}, {"timing", r.describe()},
                                       {"peaks", gpulab::testing::peak_fields()},
                                       {"kernels", gpulab::testing::launched_kernels([&](cudaStream_t s) {
                                          lab02::reduce_sum(lab02::SumRung::kGridStride, dx.data(), n, 256, scratch.data(),
                                                            result.data(), s);
                                        })},
                                       {"gpu_state", gpulab::testing::gpu_state_fields(r)}});
}

TEST_CASE("histogram bandwidth", "[gpu][perf]") {
  const std::size_t n = std::size_t{1} << 28;  // 256 MiB of bytes, ≥ 4 × L2 on current GPUs
  Rng rng = Rng::for_test("histogram perf");
  std::vector<std::uint8_t> data(n);
  for (auto& b : data) b = static_cast<std::uint8_t>(rng.engine()() & 0xFF);
  DeviceBuffer<std::uint8_t> ddata(data);
  DeviceBuffer<unsigned int> bins(lab02::kBins);
  lab02::histogram_shared(ddata.data(), n, bins.data(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<unsigned int> want(lab02::kBins, 0);
  for (auto b : data) ++want[b];
  check_bitwise(bins.download(), want, "histogram_shared 256 MiB (verified before timing)");
  const gpulab::BenchResult r = gpulab::bench([&](cudaStream_t s) { lab02::histogram_shared(ddata.data(), n, bins.data(), s); });
  gpulab::testing::record_performance("histogram_shared", gpulab::gb_per_s(static_cast<double>(n), r.median_ms), "GB/s read",
                                      memcpy_gbs_for(n), "D2D cudaMemcpy",
                                      {{"bytes", n}, {"timing", r.describe()},
                                       {"kernels", gpulab::testing::launched_kernels([&](cudaStream_t s) {
                                          lab02::histogram_shared(ddata.data(), n, bins.data(), s);
                                        })},
                                       {"gpu_state", gpulab::testing::gpu_state_fields(r)}});
}

TEST_CASE("bandwidth against stride", "[gpu][timing]") {
  // The sweep of the lesson: a warp reading 32 floats `stride` apart touches min(stride, 8)×
  // more 32-byte sectors than it needs. Reported, no threshold.
  const std::size_t n = gpulab::bandwidth_problem_elements(sizeof(float), 2);
  DeviceBuffer<float> in(Rng::for_test("stride").uniform_vector(n)), out(n);
  std::string table;
  double stride1 = 0.0, stride32 = 0.0;
  for (int stride : {1, 2, 4, 8, 16, 32}) {
    const gpulab::BenchResult r = gpulab::bench([&](cudaStream_t s) { lab02::strided_copy(in.data(), out.data(), n, stride, s); });
    const double gbs = gpulab::gb_per_s(2.0 * n * sizeof(float), r.median_ms);
    if (stride == 1) stride1 = gbs;
    if (stride == 32) stride32 = gbs;
    char cell[48];
    std::snprintf(cell, sizeof cell, "%sstride %d: %.0f GB/s", table.empty() ? "" : ", ", stride, gbs);
    table += cell;
  }
  gpulab::report::record({{"kind", "info"}, {"summary", "useful bytes per second, " + table}});
  // The sweep is for the lesson; the one thing it must show: at stride 32 every read sector
  // carries 4 useful bytes of 32, so stride 1 is far faster (1.5× is a loose floor).
  check_fact(stride1 >= 1.5 * stride32, "coalesced reads beat stride-32 reads",
             "stride 1: " + std::to_string(stride1) + " GB/s, stride 32: " + std::to_string(stride32) + " GB/s");
}
