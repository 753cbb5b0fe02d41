/// @file build.hpp
/// @brief Building targets of the CMake tree and turning a failed build into the compiler's own
/// messages (not a page of CMake and Ninja noise).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lab_config.hpp"
#include "process.hpp"

namespace gpulab::cli {

struct BuildResult {
  bool ok = false;
  std::string output;       ///< everything the build printed
  std::string diagnostics;  ///< the compiler's and linker's messages only
};

/// `cmake --build <build> --target <targets...> -j <cores>`.
BuildResult build_targets(const Paths& paths, const std::vector<std::string>& targets,
                          bool echo = false);

/// Keeps the compiler/linker messages of a build log; rewrites each (from, to) path prefix so a
/// learner sees the path of the file they wrote, not the build tree's copy of it.
std::string extract_diagnostics(const std::string& log,
                                const std::vector<std::pair<std::string, std::string>>& rewrite = {});

/// Number of CPU cores to build with.
int build_jobs();

}  // namespace gpulab::cli
