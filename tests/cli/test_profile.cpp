/// @file test_profile.cpp
/// @brief `grade --profile`'s reading of Nsight Compute (profile.hpp): the CSV of `ncu --csv --page
/// raw` with NVTX columns, units and thousands separators, and the verdicts. The data files are
/// written in the layout ncu writes (header, units row, one row per kernel, ==PROF== notes), by
/// hand: no GPU has recorded one for this project yet.
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>

#include "base/files.hpp"
#include "grade/profile.hpp"

using gpulab::cli::judge_profile;
using gpulab::cli::NcuKernel;
using gpulab::cli::parse_ncu_csv;

namespace {
std::string data(const std::string& name) { return gpulab::cli::read_text(std::string(GPULAB_TEST_DATA) + "/" + name); }
constexpr double kSoftmaxMinimum = 2.0 * 8192 * 8192 * 4;  // read and write 8192² floats once
}  // namespace

TEST_CASE("ncu CSV: one fused kernel with its metrics in bytes and sectors", "[cpu]") {
  const std::vector<NcuKernel> k = parse_ncu_csv(data("ncu-softmax-fused.csv"));
  REQUIRE(k.size() == 1);
  CHECK(k[0].name.find("softmax_fused_block") != std::string::npos);
  CHECK(k[0].metrics.at("dram__bytes_read.sum") == 268599552.0);
  CHECK(k[0].metrics.at("lts__t_sectors_op_write.sum") == 8388608.0);
  const auto v = judge_profile(k, "softmax fused", kSoftmaxMinimum, 1, 1.3);
  CHECK(v.ok);
  CHECK(v.summary.find("1 kernel;") != std::string::npos);
  CHECK(v.summary.find("1.00×") != std::string::npos);  // writes counted at L2: 8 Mi sectors × 32 B
}

TEST_CASE("ncu CSV: a range of three kernels fails and units are scaled", "[cpu]") {
  const std::vector<NcuKernel> k = parse_ncu_csv(data("ncu-softmax-chain.csv"));
  REQUIRE(k.size() == 3);
  CHECK(std::fabs(k[0].metrics.at("dram__bytes_read.sum") - 268.44e6) < 1.0);  // Mbyte → bytes
  const auto v = judge_profile(k, "softmax fused", kSoftmaxMinimum, 1, 1.3);
  CHECK_FALSE(v.ok);
  CHECK(v.problem.find("holds 3 kernels") != std::string::npos);
  // One kernel could still move too much: the chain's bytes in one launch.
  NcuKernel all{"one", {{"dram__bytes_read.sum", 3 * 268.45e6}, {"lts__t_sectors_op_write.sum", 8388608.0}}};
  const auto twice = judge_profile({all}, "softmax fused", kSoftmaxMinimum, 1, 1.3);
  CHECK_FALSE(twice.ok);
  CHECK(twice.problem.find("you moved 2.0× the bytes softmax fused needs") != std::string::npos);
}

TEST_CASE("ncu without counters or without a header is not judged as a pass", "[cpu]") {
  CHECK(gpulab::cli::ncu_lacks_permission("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters"));
  CHECK_FALSE(gpulab::cli::ncu_lacks_permission(data("ncu-softmax-fused.csv")));
  CHECK_THROWS_AS(parse_ncu_csv("==PROF== nothing was profiled\n"), std::runtime_error);
  CHECK_FALSE(judge_profile({}, "softmax fused", kSoftmaxMinimum, 1, 1.3).ok);
}
