/// @file report.hpp
/// @brief Structured records from tests to the grader: one JSON object per line. Host-only.
///
/// A test writes what it found (a comparison's numbers, a measured bandwidth) with `record()`.
/// Under the grader, GPULAB_REPORT_FD names a descriptor (a pipe that gpulab-launch, the test
/// process's parent, reads): each record is written there as one line, in order, and nothing
/// written can be taken back. Elsewhere, when GPULAB_REPORT names a file the records are appended
/// there; otherwise they are only kept in memory. Each record carries the name of the test case
/// that was running.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpulab::report {

/// Names the running test case (called by the test main when a case starts).
void set_current_case(const std::string& name);
/// The running test case's name, or "" outside one.
const std::string& current_case();

/// In a distributed test: this process is rank @p rank. Records then carry "rank" and, to a file,
/// go to GPULAB_REPORT + ".rank<r>", one file per rank (so concurrent writers never interleave).
void set_rank(int rank);

/// Appends @p record (an object) with "case" set; returns what was written.
nlohmann::json record(nlohmann::json record);

/// Every record written by this process so far (for unit tests).
const std::vector<nlohmann::json>& records();

/// Reads a JSON-lines file; lines that do not parse are returned as {"parse_error": line}.
std::vector<nlohmann::json> read_file(const std::string& path);

}  // namespace gpulab::report
