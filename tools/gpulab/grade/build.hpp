/// @file build.hpp
/// @brief Building targets of the CMake tree and turning a failed build into the compiler's own
/// messages (not a page of CMake and Ninja noise).
#pragma once

#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "base/lab_config.hpp"
#include "base/process.hpp"

namespace gpulab::cli {

struct BuildResult {
  bool ok = false;
  std::string output;       ///< everything the build printed
  std::string diagnostics;  ///< the compiler's and linker's messages only
};

/// `cmake --build <build> --target <targets...> -j <cores>`. @p progress (when not empty) names
/// what is built: the build's own step counter is shown as it goes, on one updating line on a
/// terminal, as a few plain lines otherwise.
BuildResult build_targets(const Paths& paths, const std::vector<std::string>& targets,
                          bool echo = false, const std::string& progress = "");

/// Every file of the source tree that the build reads, as the build itself records it: each
/// object's sources and headers (Ninja's dependency log, `ninja -t deps`) and the CMake files the
/// configuration read (build.ninja's own inputs); none under the build folder or in @p except.
/// Empty where the build is not Ninja's (the caller falls back to its folders).
std::vector<fs::path> build_inputs(const Paths& paths, const std::vector<fs::path>& except);

/// The files the compilation of @p object read (Ninja's dependency log); empty where unknown.
std::vector<std::string> object_inputs(const Paths& paths, const std::string& object);

/// Turns a build's output into progress lines: ninja's "[k/N]" (or make's "[ 42%]").
class BuildProgress {
 public:
  BuildProgress(std::string what, bool terminal, std::ostream& out);
  /// Feeds output as it comes.
  void feed(const std::string& chunk);
  /// Clears the updating line (terminal) at the end.
  void finish();

 private:
  void show(long step, long total);
  std::string what_, partial_;
  bool terminal_;
  std::ostream& out_;
  long shown_percent_ = -1;
  bool any_ = false;
};

/// Keeps the compiler/linker messages of a build log; rewrites each (from, to) path prefix so a
/// learner sees the path of the file they wrote, not the build tree's copy of it.
std::string extract_diagnostics(const std::string& log,
                                const std::vector<std::pair<std::string, std::string>>& rewrite = {});

/// Number of CPU cores to build with.
int build_jobs();

}  // namespace gpulab::cli
