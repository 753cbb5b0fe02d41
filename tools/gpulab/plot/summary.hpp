/// @file summary.hpp
/// @brief `gpulab summary FILE.json...`: a short results table from saved scorecards (grade
/// --json) and selftest's rows (build/selftest/selftest.json), read as data: what scripts such
/// as scripts/gpu-check print last.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpulab::cli {

/// The table for one file's JSON: a scorecard's performance figures and failures, or selftest's
/// failed rows and counts.
std::string summarize(const nlohmann::json& j, const std::string& name);

/// Prints summarize() for each file; 1 when a file cannot be read.
int summary_command(const std::vector<std::string>& files);

}  // namespace gpulab::cli
