/// @file emulate_memory.cpp
/// @brief Lab 02 on the CPU block emulator (`scripts/emulate 02`): bank arithmetic, the three
/// transposes (bitwise), the four sums (exact on integers) at three block sizes, the two
/// histograms (exact) and the strided copy, at awkward sizes, with guard bands.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "guarded.hpp"
#include "memory.hpp"

namespace {
void checks(emu::Tally& tally) {
  std::mt19937 rng(2026);

  // 02.1 on a few patterns (the tests have the full table).
  std::array<std::uint32_t, 32> column{}, padded{};
  for (std::uint32_t l = 0; l < 32; ++l) column[l] = 32 * l, padded[l] = 33 * l;
  tally.check(lab02::bank_conflict_ways(column) == 32, "bank_conflict_ways: a column of a 32 x 32 tile is 32-way");
  tally.check(lab02::bank_conflict_ways(padded) == 1, "bank_conflict_ways: a column of a 32 x 33 tile is conflict-free");

  // Transposes, bitwise.
  using Transpose = void (*)(const float*, float*, int, int, cudaStream_t);
  const std::pair<const char*, Transpose> transposes[] = {{"transpose_naive", lab02::transpose_naive},
                                                          {"transpose_tiled", lab02::transpose_tiled},
                                                          {"transpose_padded", lab02::transpose_padded}};
  const std::pair<int, int> shapes[] = {{1, 1}, {17, 31}, {32, 32}, {33, 65}, {257, 129}, {3, 1001}};
  for (const auto& [name, fn] : transposes) {
    for (const auto& [rows, cols] : shapes) {
      std::vector<float> in(static_cast<std::size_t>(rows) * cols);
      for (float& v : in) v = static_cast<float>(rng() % 100000) / 7.0f;
      emu::Guarded<float> din(in), dout(std::vector<float>(in.size(), -1.0f));
      fn(din.data(), dout.data(), rows, cols, nullptr);
      const std::vector<float> out = dout.values();
      bool ok = true;
      for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < cols; ++c) ok = ok && out[static_cast<std::size_t>(c) * rows + r] == in[static_cast<std::size_t>(r) * cols + c];
      }
      const std::string what = std::string(name) + " " + std::to_string(rows) + "x" + std::to_string(cols);
      tally.check(ok, what, "an element is not where the transpose puts it");
      tally.check(din.stray_writes() + dout.stray_writes() == 0 && din.values() == in, what + " guard bands and input");
    }
  }

  // Sums of integers: exact in any order.
  const lab02::SumRung rungs[] = {lab02::SumRung::kDivergent, lab02::SumRung::kSequential, lab02::SumRung::kShuffle,
                                  lab02::SumRung::kGridStride};
  const char* rung_names[] = {"divergent", "sequential", "shuffle", "grid-stride"};
  for (int r = 0; r < 4; ++r) {
    for (int threads : {64, 256, 1024}) {
      for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{31}, std::size_t{33}, std::size_t{257},
                            std::size_t{1023}, std::size_t{20001}}) {
        std::vector<float> x(n);
        double exact = 0;
        for (float& v : x) {
          v = static_cast<float>(static_cast<int>(rng() % 17) - 8);
          exact += v;
        }
        for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {  // 1: the float4 path is not allowed
          emu::Guarded<float> dx(x, offset), scratch(std::vector<float>(lab02::reduce_scratch_floats(n), -3.0f)),
              result(std::vector<float>(1, -3.0f));
          lab02::reduce_sum(rungs[r], dx.data(), n, threads, scratch.data(), result.data(), nullptr);
          const std::string what = std::string("reduce_sum ") + rung_names[r] + " n=" + std::to_string(n) +
                                   " threads=" + std::to_string(threads) + (offset ? " misaligned" : "");
          tally.check(static_cast<double>(result.values()[0]) == exact, what,
                      "got " + std::to_string(result.values()[0]) + ", want " + std::to_string(exact));
          tally.check(dx.stray_writes() + scratch.stray_writes() + result.stray_writes() == 0 && dx.values() == x,
                      what + " guard bands and input");
        }
      }
    }
  }

  // Histograms: exact counts, bins set (not added to).
  using Histogram = void (*)(const std::uint8_t*, std::size_t, unsigned int*, cudaStream_t);
  const std::pair<const char*, Histogram> histograms[] = {{"histogram_global", lab02::histogram_global},
                                                          {"histogram_shared", lab02::histogram_shared}};
  for (const auto& [name, fn] : histograms) {
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{255}, std::size_t{1000}, std::size_t{65537}}) {
      for (int kind = 0; kind < 2; ++kind) {
        std::vector<std::uint8_t> data(n);
        for (auto& b : data) b = kind == 0 ? static_cast<std::uint8_t>(rng()) : std::uint8_t{200};
        std::vector<unsigned int> want(lab02::kBins, 0);
        for (auto b : data) ++want[b];
        emu::Guarded<std::uint8_t> ddata(data);
        emu::Guarded<unsigned int> bins(std::vector<unsigned int>(lab02::kBins, 0xABABABABu));
        fn(ddata.data(), n, bins.data(), nullptr);
        const std::string what = std::string(name) + " n=" + std::to_string(n) + (kind ? " one value" : " uniform");
        tally.check(bins.values() == want, what, "counts differ");
        tally.check(ddata.stray_writes() + bins.stray_writes() == 0, what + " guard bands");
      }
    }
  }

  // The given strided copy.
  for (int stride : {1, 3, 32}) {
    const std::size_t n = 4099;
    std::vector<float> in(n);
    for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<float>(i);
    emu::Guarded<float> din(in), dout(std::vector<float>(n, -1.0f));
    lab02::strided_copy(din.data(), dout.data(), n, stride, nullptr);
    const std::vector<float> out = dout.values();
    bool ok = true;
    for (std::size_t i = 0; i < n; ++i) ok = ok && out[i] == in[(i * stride) % n];
    tally.check(ok && dout.stray_writes() == 0, "strided_copy stride " + std::to_string(stride));
  }
}
}  // namespace

int main() { return emu::run_driver("02", checks); }
