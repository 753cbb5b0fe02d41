/// @file grade_inputs.cpp
/// @brief What every stage reads (GradeInputs): the widths a case runs at.
#include "grade/grade_stages.hpp"

namespace gpulab::cli {

std::vector<int> GradeInputs::widths() const {
  if (!lab.distributed()) return {};
  return options.ranks.empty() ? lab.mpi_ranks : options.ranks;
}

int GradeInputs::perf_width() const {
  if (!lab.distributed()) return 0;
  if (!options.ranks.empty()) return options.ranks.front();
  // Across a cluster the performance cases run one rank per node: what the links carry.
  if (options.nodes >= 2) return options.nodes;
  return lab.perf_ranks.empty() ? lab.mpi_ranks.front() : lab.perf_ranks.front();
}

}  // namespace gpulab::cli
