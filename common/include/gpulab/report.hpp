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

#include <cstddef>
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

/// Which of a check's values this process sends beside its records (GPULAB_OUTPUTS, set by the
/// grader, and only where the records go to a descriptor): none; the values under test ("got",
/// a submission's run); or those and what they were compared with ("all", the reference's run,
/// whose expected values and bounds the grader then holds the submission's to).
enum class Outputs { kNone, kGot, kAll };
/// What GPULAB_OUTPUTS asks this process to send (kNone without a records descriptor).
Outputs outputs_wanted();

/// One block of a check's values: raw bytes.
struct Block {
  const void* data;   ///< the first byte
  std::size_t bytes;  ///< how many
};

/// Appends @p header (an object, "kind": "output") with "case" set, followed by @p blocks: each a
/// line `@blob <bytes>` and the bytes, which gpulab-launch takes out of the records into a file
/// the grader reads once the process has ended. Nothing is written unless outputs_wanted() says so.
void output(nlohmann::json header, const std::vector<Block>& blocks);

/// Every record written by this process so far (for unit tests).
const std::vector<nlohmann::json>& records();

/// Reads a JSON-lines file; lines that do not parse are returned as {"parse_error": line}.
std::vector<nlohmann::json> read_file(const std::string& path);

}  // namespace gpulab::report
