/// @file gpulab_timeline.hpp
/// @brief The distributed labs' timelines for the scorecard: each rank's spans (what, start,
/// end on the machine's one clock, gpulab::dist::now()) gathered on rank 0 as
/// [[{"what", "start_ms", "end_ms"[, "micro" or "unit"]}, ...] per rank], in milliseconds from the earliest start
/// (`gpulab grade NN --plot` draws them). Harness communication (PMPI_*), never counted.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gpulab/report.hpp"

namespace gpulab::testing {

/// One span of one rank's timeline.
struct Span {
  std::string what;  ///< "forward", "backward", "bucket 0", "recv wait"
  double start = 0.0, end = 0.0;
  int micro = -1;    ///< the micro-batch it worked on (lab 09), drawn on its block; -1: none
  int unit = -1;     ///< the model unit it computed (lab 11), drawn on its block; -1: none
};

/// Every rank's @p mine on rank 0 (null on the others); collective over MPI_COMM_WORLD.
inline nlohmann::json gather_lanes(const std::vector<Span>& mine) {
  int w = 1, r = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &w);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  nlohmann::json lane = nlohmann::json::array();
  for (const Span& s : mine) lane.push_back({s.what, s.start, s.end, s.micro, s.unit});
  const std::string text = lane.dump();
  int length = static_cast<int>(text.size());
  std::vector<int> lengths(static_cast<std::size_t>(w)), offsets(static_cast<std::size_t>(w));
  PMPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  for (int k = 1; k < w; ++k) offsets[static_cast<std::size_t>(k)] = offsets[static_cast<std::size_t>(k - 1)] + lengths[static_cast<std::size_t>(k - 1)];
  std::string all(static_cast<std::size_t>(offsets.back() + lengths.back()), ' ');
  PMPI_Gatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (r != 0) return nullptr;
  std::vector<nlohmann::json> lanes;
  double origin = 1e300;
  for (int k = 0; k < w; ++k) {
    lanes.push_back(nlohmann::json::parse(all.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(k)]), static_cast<std::size_t>(lengths[static_cast<std::size_t>(k)]))));
    for (const auto& s : lanes.back()) origin = std::min(origin, s[1].get<double>());
  }
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& l : lanes) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& s : l) {
      nlohmann::json span = {{"what", s[0]}, {"start_ms", (s[1].get<double>() - origin) * 1e3}, {"end_ms", (s[2].get<double>() - origin) * 1e3}};
      if (s[3].get<int>() >= 0) span["micro"] = s[3];
      if (s[4].get<int>() >= 0) span["unit"] = s[4];
      out.push_back(span);
    }
    ranks.push_back(out);
  }
  return ranks;
}

}  // namespace gpulab::testing
