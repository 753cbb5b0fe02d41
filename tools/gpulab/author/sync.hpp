/// @file sync.hpp
/// @brief `gpulab sync`: write labs/ from solutions/, never over a learner's change.
///
/// labs/.sync-manifest.json records the hash of every file sync wrote. A file in labs/ whose
/// hash still matches is untouched since, and may be rewritten; one that differs holds the
/// learner's work, and sync refuses (or, with --force, moves it aside to <file>.bak-<time>).
#pragma once

#include <string>
#include <vector>

#include "base/lab_config.hpp"

namespace gpulab::cli {

struct SyncReport {
  std::vector<std::string> written;     ///< files (re)written
  std::vector<std::string> unchanged;   ///< already as sync would write them
  std::vector<std::string> refused;     ///< learner-changed files left alone
  std::vector<std::string> backed_up;   ///< with --force: where the learner's version went
  std::vector<std::string> drift;       ///< --check: files that differ, with the first line that does
};

/// Writes labs/ (check = false) or only compares (check = true).
SyncReport sync_labs(const Paths& paths, const std::vector<LabConfig>& labs, bool check, bool force);

/// Files in labs/ that differ from what sync last wrote (the learner's work), as "slug/file".
std::vector<std::string> learner_changes(const Paths& paths, const std::vector<LabConfig>& labs);

/// Regions without a "TODO(NN.k)" section in the lab's lesson, as "NN.k (lessons/...)".
std::vector<std::string> lesson_gaps(const LabConfig& lab);

}  // namespace gpulab::cli
