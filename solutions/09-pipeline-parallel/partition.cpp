/// @file partition.cpp
/// @brief Lab 09 — cutting the model into stages. Read lessons/09-pipeline-parallel.md.
///
/// A pipeline runs at the pace of its slowest stage: every micro-batch waits there. So the cut
/// minimises the largest stage's cost; with L layers and p stages there are C(L − 1, p − 1) cuts,
/// but the best largest-stage cost of "layers i … L − 1 in k stages" depends only on (i, k): a
/// table of L·p entries, each the best of at most L choices.
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <vector>

#include "pipeline.hpp"

namespace lab09 {

std::vector<std::size_t> partition(const std::vector<double>& layer_flops, int stages) {
  // BEGIN SOLUTION(09.1) The best largest stage by dynamic programming, then the earliest cut that achieves it
  const std::size_t layers = layer_flops.size();
  if (stages < 1 || static_cast<std::size_t>(stages) > layers) {
    throw std::invalid_argument("partition: need 1 <= stages <= layers (" + std::to_string(stages) + " stages, " + std::to_string(layers) + " layers)");
  }
  const std::size_t p = static_cast<std::size_t>(stages);
  std::vector<double> prefix(layers + 1, 0.0);
  for (std::size_t i = 0; i < layers; ++i) prefix[i + 1] = prefix[i] + layer_flops[i];
  auto cost = [&](std::size_t a, std::size_t b) { return prefix[b] - prefix[a]; };  // layers [a, b)
  const double inf = std::numeric_limits<double>::infinity();
  // best[k][i]: the smallest largest-stage cost of layers [i, L) in k non-empty stages.
  std::vector<std::vector<double>> best(p + 1, std::vector<double>(layers + 1, inf));
  best[0][layers] = 0.0;
  for (std::size_t k = 1; k <= p; ++k) {
    for (std::size_t i = 0; i + k <= layers; ++i) {
      for (std::size_t j = i + 1; j + (k - 1) <= layers; ++j) best[k][i] = std::min(best[k][i], std::max(cost(i, j), best[k - 1][j]));
    }
  }
  // Walk forward: each boundary as early as it can be while the rest still achieves the optimum.
  // (Comparisons are exact: every candidate is the same sums of the same prefix values.)
  const double target = best[p][0];
  std::vector<std::size_t> bounds = {0};
  std::size_t i = 0;
  for (std::size_t k = p; k >= 1; --k) {
    std::size_t j = i + 1;
    while (!(cost(i, j) <= target && best[k - 1][j] <= target)) ++j;
    bounds.push_back(j);
    i = j;
  }
  return bounds;
  // STUB: return {};
  // END SOLUTION
}

}  // namespace lab09
