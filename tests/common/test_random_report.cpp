/// @file test_random_report.cpp
/// @brief Reproducible random streams, JSON-lines records and the names they give kernels.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gpulab/random.hpp"
#include "gpulab/report.hpp"
#include "gpulab_test.hpp"

TEST_CASE("random streams are reproducible per seed and salt", "[cpu]") {
  const std::uint64_t saved = gpulab::test_seed();
  gpulab::set_test_seed(42);
  const auto a = gpulab::Rng::for_test("x").uniform_vector(100);
  const auto b = gpulab::Rng::for_test("x").uniform_vector(100);
  const auto c = gpulab::Rng::for_test("y").uniform_vector(100);
  gpulab::set_test_seed(43);
  const auto d = gpulab::Rng::for_test("x").uniform_vector(100);
  gpulab::set_test_seed(saved);
  CHECK(a == b);
  CHECK(a != c);
  CHECK(a != d);
}

TEST_CASE("uniform values are never zero and stay in range", "[cpu]") {
  gpulab::Rng rng(7);
  for (float v : rng.uniform_vector(100000, -1.0f, 1.0f)) {
    REQUIRE(v != 0.0f);
    REQUIRE(v >= -1.0f);
    REQUIRE(v < 1.0f);
  }
  for (float v : rng.integer_vector(1000, -3, 3)) {
    REQUIRE(v == static_cast<float>(static_cast<int>(v)));
    REQUIRE(v >= -3.0f);
    REQUIRE(v <= 3.0f);
  }
}

TEST_CASE("records carry the case name and reach the report file", "[cpu]") {
  const auto path = std::filesystem::temp_directory_path() / "gpulab-report-test.jsonl";
  std::filesystem::remove(path);
  setenv("GPULAB_REPORT", path.c_str(), 1);
  gpulab::report::record({{"check", "a"}, {"ok", true}});
  gpulab::report::record({{"check", "b"}, {"value", std::numeric_limits<double>::quiet_NaN()}});
  unsetenv("GPULAB_REPORT");
  {
    std::ofstream(path, std::ios::app) << "not json\n";
  }
  const auto recs = gpulab::report::read_file(path.string());
  REQUIRE(recs.size() == 3);
  CHECK(recs[0]["case"] == "records carry the case name and reach the report file");
  CHECK(recs[0]["check"] == "a");
  CHECK(recs[1]["value"].is_null());  // NaN is not JSON: written as null, read as "not a number"
  CHECK(recs[2].contains("parse_error"));
  std::filesystem::remove(path);
}

TEST_CASE("a kernel's name on the scorecard keeps its namespaces and template and drops its parameters", "[cpu]") {
  using gpulab::testing::kernel_display_name;
  // The first H200 run showed "lab04::" and "": the parameter list was cut at the first '(',
  // which an anonymous namespace's "(anonymous namespace)" puts before the kernel's name.
  CHECK(kernel_display_name("(anonymous namespace)::staged_copy_kernel(float const*, float*, int)") == "staged_copy_kernel");
  CHECK(kernel_display_name("lab04::(anonymous namespace)::hgemm_mma_kernel<128, 64>(__half const*, int)") ==
        "lab04::hgemm_mma_kernel<128, 64>");
  CHECK(kernel_display_name("lab03::sgemm_coalesced_kernel(int, int, int, float const*, float const*, float*)") ==
        "lab03::sgemm_coalesced_kernel");
  CHECK(kernel_display_name("apply<void (*)(float)>(float*)") == "apply<void (*)(float)>");
  CHECK(kernel_display_name("_Z6kernelPf") == "_Z6kernelPf");  // not demangled: left as it is
  CHECK(kernel_display_name("?") == "?");
}
