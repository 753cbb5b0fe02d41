/// @file gpulab_dist_test.hpp
/// @brief What the distributed labs' tests share: agreement among ranks, a guard around learner
/// code that may throw on one rank only, a bit-for-bit comparison that names the first
/// difference, the count of every collective and message a rank sent, and a ping-pong that
/// measures the link's α and β. Harness communication
/// goes through PMPI_* directly, never counted.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "gpulab/dist.hpp"
#include "gpulab/stats.hpp"
#include "gpulab_test.hpp"

namespace gpulab::testing {

/// True on every rank if it is true on every rank (harness communication, not counted).
inline bool all_ranks(bool mine) {
  int in = mine ? 1 : 0, out = 0;
  PMPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return out == 1;
}

/// Runs the learner's @p f; if it throws, the other ranks may be waiting in a collective that
/// this one will never start, so say why and stop every rank (the grader reports the abort).
template <class F>
void learner(const std::string& what, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    int r = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &r);
    check_fact(false, what + " on rank " + std::to_string(r), std::string("threw: ") + e.what(),
               "every rank must take part in every collective: an exception on one leaves the "
               "others waiting");
    std::fprintf(stderr, "rank %d: %s threw: %s\n", r, what.c_str(), e.what());
    std::fflush(stderr);
    PMPI_Abort(MPI_COMM_WORLD, 1);
  }
}

/// "" when equal bit for bit, else the first difference (NaN is never equal; −0 is not +0).
inline std::string first_difference(const std::vector<float>& got, const std::vector<float>& want,
                                    const std::string& name) {
  if (got.size() != want.size())
    return name + ": " + std::to_string(got.size()) + " values, want " +
           std::to_string(want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 || std::isnan(got[i])) {
      char b[240];
      std::snprintf(b, sizeof b, "%s[%zu] is %.9g, one process gives %.9g", name.c_str(), i, got[i],
                    want[i]);
      return b;
    }
  }
  return "";
}

/// Everything that left this rank through the Communicator or a library since the last reset:
/// the three collectives by kind, point-to-point messages, and any other library collective
/// called inside a LearnerScope (MPI's, or the blocking allreduce_sum, which bypass the counts).
struct Count {
  std::uint64_t calls[3] = {0, 0, 0};
  std::uint64_t floats[3] = {0, 0, 0};
  std::uint64_t messages = 0;  ///< point-to-point sends through the Communicator
  std::string others;          ///< other library collectives called
};
inline Count counted(const dist::Communicator& c) {
  Count n;
  const auto tr = c.traffic();
  for (int k = 0; k < 3; ++k) {
    n.calls[k] = tr.collective_calls[static_cast<std::size_t>(k)];
    n.floats[k] = tr.collective_bytes[static_cast<std::size_t>(k)] / 4;
  }
  n.messages = tr.messages_sent();
  for (const std::string& name : gpulab::dist::library_collectives_called()) {
    if (name != "Communicator::iallreduce_sum" && name != "Communicator::ireduce_scatter_sum" &&
        name != "Communicator::iall_gather") {
      n.others += (n.others.empty() ? "" : ", ") + name;
    }
  }
  return n;
}
/// Starts counting afresh (the traffic and the library collectives noted in a LearnerScope).
inline void reset(dist::Communicator& c) {
  c.reset_traffic();
  gpulab::dist::reset_library_collectives();
}
inline std::string describe(const Count& n) {
  std::string s;
  for (int k = 0; k < 3; ++k) {
    s += (k ? ", " : "") + std::string(gpulab::dist::to_string(static_cast<dist::Collective>(k))) +
         " " + std::to_string(n.calls[k]) + " call(s) of " + std::to_string(n.floats[k]) +
         " floats";
  }
  if (n.messages > 0)
    s += "; " + std::to_string(n.messages) + " point-to-point message(s)";
  if (!n.others.empty())
    s += "; other collectives called: " + n.others;
  return s;
}
inline bool same(const Count& a, const Count& b) {
  for (int k = 0; k < 3; ++k) {
    if (a.calls[k] != b.calls[k] || a.floats[k] != b.floats[k])
      return false;
  }
  return a.messages == b.messages && a.others == b.others;
}

/// One-way time of @p count floats between ranks 0 and 1 (the median of 20 round trips after 5
/// warm-ups, harness messages through PMPI: never counted against the learner), on every rank.
inline double ping_pong_seconds(std::size_t count) {
  int r = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &r);
  std::vector<float> buffer(std::max<std::size_t>(count, 1), 1.0f);
  std::vector<double> samples;
  for (int k = 0; k < 25; ++k) {
    PMPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    if (r == 0) {
      PMPI_Send(buffer.data(), static_cast<int>(count), MPI_FLOAT, 1, 10, MPI_COMM_WORLD);
      PMPI_Recv(buffer.data(), static_cast<int>(count), MPI_FLOAT, 1, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (r == 1) {
      PMPI_Recv(buffer.data(), static_cast<int>(count), MPI_FLOAT, 0, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      PMPI_Send(buffer.data(), static_cast<int>(count), MPI_FLOAT, 0, 10, MPI_COMM_WORLD);
    }
    if (k >= 5) samples.push_back((MPI_Wtime() - t0) / 2.0);
  }
  double t = gpulab::median(samples);
  PMPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return t;
}

}  // namespace gpulab::testing
