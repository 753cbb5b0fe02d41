/// @file process.hpp
/// @brief Running a command in its own process group with a time limit, output captured to a
/// file, every process of the group killed at the end (no orphans). POSIX only.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace gpulab::cli {

struct ProcessResult {
  int exit_code = -1;       ///< the exit status when the process exited
  int signal = 0;           ///< the signal that killed it, 0 if it exited
  bool timed_out = false;   ///< killed by us at the time limit
  bool failed_to_start = false;
  double seconds = 0.0;     ///< wall time
  std::string output;       ///< stdout and stderr together (the last `keep_bytes` of them)

  bool exited(int code) const { return !timed_out && signal == 0 && exit_code == code; }
  /// "exit 1", "killed by SIGSEGV", "timed out after 60 s", ...
  std::string describe() const;
};

struct ProcessOptions {
  double timeout_s = 60.0;                      ///< ≤ 0: no limit
  std::map<std::string, std::string> env;       ///< added to (and overriding) the environment
  std::string cwd;                              ///< "" = the current directory
  bool echo = false;                            ///< also copy the output to our stdout, live
  std::size_t keep_bytes = 1 << 20;
};

/// Runs argv[0] (searched in PATH) with arguments argv[1..].
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

}  // namespace gpulab::cli
