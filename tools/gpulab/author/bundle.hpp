/// @file bundle.hpp
/// @brief `gpulab bundle NN --for gradescope --out DIR`: Gradescope's autograder for lab NN —
/// setup.sh and run_autograder (from tools/gradescope/, the lab filled in) and course.tar.gz (the
/// tree at HEAD, `git archive`), zipped into DIR/autograder.zip where `zip` is installed.
#pragma once

#include <string>

#include "base/paths.hpp"

namespace gpulab::cli {

struct BundleOptions {
  std::string lab;
  std::string platform = "gradescope";
  std::string out;  ///< "" = build/bundle/NN-slug
};

/// Exit 0 written, 2 could not (no such lab, the folder holds a bundle already, no git).
int make_bundle(const Paths& paths, const BundleOptions& options);

}  // namespace gpulab::cli
