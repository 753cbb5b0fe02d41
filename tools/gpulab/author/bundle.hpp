/// @file bundle.hpp
/// @brief `gpulab bundle NN --for gradescope|classroom --out DIR`. Gradescope: the autograder for
/// lab NN — setup.sh and run_autograder (from tools/gradescope/, the lab filled in) and
/// course.tar.gz (the tree at HEAD, `git archive`), zipped into DIR/autograder.zip where `zip` is
/// installed. GitHub Classroom: the assignment's template repository — the lab's skeleton files,
/// .github/workflows/classroom.yml (tools/classroom/, the course's GitHub repository and HEAD
/// pinned in it) and a README.
#pragma once

#include <string>

#include "base/paths.hpp"

namespace gpulab::cli {

struct BundleOptions {
  std::string lab;
  std::string platform = "gradescope";
  std::string out;          ///< "" = build/bundle/NN-slug-PLATFORM
  std::string course_repo;  ///< classroom: the course's GitHub "owner/name" ("" = origin's)
};

/// Exit 0 written, 2 could not (no such lab, the folder is not empty, no git, no GitHub repository for the course).
int make_bundle(const Paths& paths, const BundleOptions& options);

}  // namespace gpulab::cli
