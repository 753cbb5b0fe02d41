/// @file integrity.hpp
/// @brief The trees are not the learner's to change. Before the first learner process runs, the
/// grader hashes what its verdict rests on: its own build (the reference's executables, the test
/// objects, libgpulab), the source folders it reads (tests/, solutions/ and labs/ of the lab), the
/// submission, and the learner's progress file; it keeps a copy of the source folders. After
/// every learner process it looks again: a change is tampering, which fails the grade, and is
/// put back (sources restored from the copy, the changed version kept beside it so that an edit
/// made by hand during a grade is never lost; build artefacts removed so the next build makes
/// them again). As root the code under test also runs with these paths read-only (process.hpp).
#pragma once

#include <string>
#include <vector>

#include "base/files.hpp"

namespace gpulab::cli {

class TreeGuard {
 public:
  TreeGuard() = default;
  /// Hashes @p artefacts (build outputs: removed when changed, so the next build makes them
  /// again), @p folders and @p documents (sources and the learner's progress: copied into
  /// @p snapshot and put back when changed).
  TreeGuard(std::vector<fs::path> artefacts, std::vector<fs::path> folders, std::vector<fs::path> documents, fs::path snapshot);
  /// "" when nothing changed since construction; else the first change ("solutions/07-x/ring.cpp
  /// changed"), after putting everything back.
  std::string check_and_repair();
  /// Hashes the artefacts again: after the grader itself rebuilt one, before any learner process ran since.
  void rehash_artefacts();
  bool armed() const { return !snapshot_.empty(); }

 private:
  void keep_changed(const fs::path& path) const;
  std::vector<fs::path> files_, folders_, documents_;
  std::vector<std::string> file_hashes_, document_hashes_;
  std::vector<TreeHashes> folder_hashes_;
  fs::path snapshot_;
};

}  // namespace gpulab::cli
