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
  // TODO(09.1): The best largest stage by dynamic programming, then the earliest cut that achieves it
  // See lessons/09-pipeline-parallel.md, section "TODO(09.1)".
  return {};
}

}  // namespace lab09
