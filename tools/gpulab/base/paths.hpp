/// @file paths.hpp
/// @brief Where things are: the source tree (the folder holding ./gpulab) and the build tree.
#pragma once

#include "base/files.hpp"

namespace gpulab::cli {

struct Paths {
  fs::path root;   ///< the source tree
  fs::path build;  ///< build/ by default
  /// From GPULAB_ROOT / GPULAB_BUILD_DIR (set by ./gpulab), else the current directory.
  static Paths from_environment();
  /// The learner's state (progress, hints): .gpulab/ at the top of the tree, never among sources.
  fs::path state_dir() const { return root / ".gpulab"; }
};

}  // namespace gpulab::cli
