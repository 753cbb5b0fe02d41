/// @file paths.cpp
/// @brief Paths from the environment (see paths.hpp).
#include "base/paths.hpp"

#include <cstdlib>

namespace gpulab::cli {

Paths Paths::from_environment() {
  Paths p;
  const char* root = std::getenv("GPULAB_ROOT");
  p.root = fs::absolute(root != nullptr && *root ? fs::path(root) : fs::current_path());
  const char* build = std::getenv("GPULAB_BUILD_DIR");
  p.build = fs::absolute(build != nullptr && *build ? fs::path(build) : p.root / "build");
  return p;
}

}  // namespace gpulab::cli
