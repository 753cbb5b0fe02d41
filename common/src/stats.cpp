/// @file stats.cpp
/// @brief Median, mean and spread of timing samples.
#include "gpulab/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gpulab {

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  const std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + mid);
  return 0.5 * (lower + upper);
}

double mean(const std::vector<double>& values) {
  if (values.empty()) return 0.0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double stddev(const std::vector<double>& values) {
  if (values.size() < 2) return 0.0;
  const double m = mean(values);
  double sum_sq = 0.0;
  for (double v : values) sum_sq += (v - m) * (v - m);
  return std::sqrt(sum_sq / static_cast<double>(values.size() - 1));
}

double coefficient_of_variation(const std::vector<double>& values) {
  const double m = mean(values);
  return m == 0.0 ? 0.0 : stddev(values) / m;
}

}  // namespace gpulab
