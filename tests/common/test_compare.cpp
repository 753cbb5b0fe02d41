/// @file test_compare.cpp
/// @brief Bitwise and bounded comparison: what passes, what fails, what is reported.
#include <catch2/catch.hpp>

#include <limits>

#include "gpulab/compare.hpp"

using gpulab::compare_bitwise;
using gpulab::compare_within;

TEST_CASE("compare_bitwise finds the first mismatch", "[cpu]") {
  const std::vector<float> want = {1, 2, 3, 4};
  CHECK(compare_bitwise(want, want).ok());
  std::vector<float> got = want;
  got[2] = std::nextafter(3.0f, 4.0f);  // one ulp off is still wrong for a copy
  got[3] = 0;
  const auto r = compare_bitwise(got, want);
  CHECK_FALSE(r.ok());
  CHECK(r.mismatches == 2);
  REQUIRE(!r.first.empty());
  CHECK(r.first[0].index == 2);
  CHECK(r.summary("copy").find("first at index 2") != std::string::npos);
}

TEST_CASE("compare_bitwise: NaN never matches and sizes must agree", "[cpu]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> a = {nan};
  const auto r = compare_bitwise(a, a);  // even the same NaN bits
  CHECK_FALSE(r.ok());
  CHECK(r.non_finite == 1);
  CHECK_FALSE(compare_bitwise(std::vector<float>{1, 2}, std::vector<float>{1, 2, 3}).ok());
  CHECK_FALSE(compare_bitwise(std::vector<int>{1, 2}, std::vector<int>{1, 3}).ok());
}

TEST_CASE("compare_within honours per-element bounds", "[cpu]") {
  const std::vector<double> want = {1.0, 100.0, -5.0};
  const std::vector<double> bound = {1e-6, 1e-3, 0.0};
  CHECK(compare_within({1.0f, 100.0005f, -5.0f}, want, bound).ok());
  const auto r = compare_within({1.0f, 100.01f, -5.0f}, want, bound);
  CHECK_FALSE(r.ok());
  CHECK(r.first[0].index == 1);
  CHECK(r.max_error == Approx(0.01).epsilon(0.01));
  // A zero bound demands exactness.
  CHECK_FALSE(compare_within({1.0f, 100.0f, -5.000001f}, want, bound).ok());
}

TEST_CASE("compare_within fails on NaN and Inf whatever the bound", "[cpu]") {
  const std::vector<double> want = {1.0, 2.0};
  const std::vector<double> huge = {1e300, 1e300};
  const auto r = compare_within({std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}, want, huge);
  CHECK_FALSE(r.ok());
  CHECK(r.non_finite == 2);
  CHECK(r.summary("x").find("2 NaN/Inf") != std::string::npos);
}
