/// @file integrity.hpp
/// @brief The trees are not the learner's to change. Before the first learner process runs, the
/// grader hashes what its verdict rests on: its own build (the reference's executables, the test
/// objects, libgpulab, gpulab-launch), every source file the build reads (Ninja's dependency log:
/// tests/support, common/, tools/, the CMake files; the lab's tests/ and solutions/ as whole
/// folders), the submission, and the learner's progress file; it keeps a copy of the sources. After
/// every learner process it looks again: a change is tampering, which fails the grade, and is
/// put back (sources restored from the copy, the changed version kept beside it so that an edit
/// made by hand during a grade is never lost; build artefacts removed so the next build makes
/// them again). Where it can, the code under test also runs in a sandbox that shows it these
/// files read-only or not at all (process.hpp); the guard covers the runs without one.
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
  std::vector<fs::file_time_type> document_times_;
  std::vector<TreeHashes> folder_hashes_;
  fs::path snapshot_;
};

}  // namespace gpulab::cli
