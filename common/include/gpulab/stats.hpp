/// @file stats.hpp
/// @brief Small statistics for timings: median, mean, spread. Host-only.
#pragma once

#include <vector>

namespace gpulab {

/// Median of @p values (the mean of the two middle values for an even count); 0 when empty.
double median(std::vector<double> values);

/// Arithmetic mean; 0 when empty.
double mean(const std::vector<double>& values);

/// Sample standard deviation (n − 1 in the denominator); 0 for fewer than two values.
double stddev(const std::vector<double>& values);

/// Coefficient of variation, stddev / mean; 0 when the mean is 0.
double coefficient_of_variation(const std::vector<double>& values);

}  // namespace gpulab
