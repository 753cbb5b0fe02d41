/// @file test_stats.cpp
/// @brief median, mean, spread.
#include <catch2/catch.hpp>

#include "gpulab/stats.hpp"

TEST_CASE("median of odd and even counts", "[cpu]") {
  CHECK(gpulab::median({}) == 0.0);
  CHECK(gpulab::median({3.0}) == 3.0);
  CHECK(gpulab::median({5.0, 1.0, 3.0}) == 3.0);
  CHECK(gpulab::median({4.0, 1.0, 3.0, 2.0}) == 2.5);
  CHECK(gpulab::median({1.0, 1.0, 100.0}) == 1.0);  // one outlier does not move it
}

TEST_CASE("mean and standard deviation and coefficient of variation", "[cpu]") {
  const std::vector<double> v = {2, 4, 4, 4, 5, 5, 7, 9};
  CHECK(gpulab::mean(v) == Approx(5.0));
  CHECK(gpulab::stddev(v) == Approx(2.138089935));  // sample (n − 1) deviation
  CHECK(gpulab::coefficient_of_variation(v) == Approx(2.138089935 / 5.0));
  CHECK(gpulab::stddev({1.0}) == 0.0);
  CHECK(gpulab::coefficient_of_variation({0.0, 0.0}) == 0.0);
}
