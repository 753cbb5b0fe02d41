/// @file grade_class.hpp
/// @brief `gpulab grade-class NN SUBMISSIONS/`: a class's submissions graded one after another,
/// each by its own `gpulab grade --submission` process (the grader runs the code under test in
/// its sandbox), into OUT/students/<student>/ (the scorecard as text and JSON, Gradescope's
/// results.json, the hash of what was graded), then OUT/gradebook.csv, OUT/leaderboard.csv and
/// OUT/leaderboard.html.
///
/// A submission is a folder, a .zip, a .tar.gz / .tgz or a .tar named after the student. An
/// archive is listed before it is unpacked: an absolute path, a `..` component, a link, a device,
/// an entry over 4 MiB, more than 10 000 entries or 64 MiB in all refuse it with one line that
/// says which; it is then unpacked inside bubblewrap (only its own folder writable, no network)
/// where bubblewrap can run. The lab's files (lab.json "sources") must be at its top or inside one
/// folder. A crash or Ctrl-C midway loses nothing: a student whose files hash as at their last
/// grade is not graded again; a changed submission is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/paths.hpp"

namespace gpulab::cli {

struct ClassOptions {
  std::string lab;               ///< "08", "8" or the slug
  std::string submissions;       ///< the folder of submissions
  std::string out;               ///< "" = build/class/NN-slug
  double timeout_s = 3600.0;     ///< per student's grade
  long memory_mb = 16384;        ///< each test process's resident memory, at most (the launcher kills it past that)
};

/// One entry of an archive's listing.
struct ArchiveEntry {
  std::string name;
  char type = 'f';  ///< f file, d folder, l symbolic link, h hard link, o anything else
  std::uint64_t size = 0;
};

/// Why an archive with @p entries must not be unpacked ("" when it may).
std::string archive_problem(const std::vector<ArchiveEntry>& entries);
/// `tar -tv` output (GNU tar) as entries; throws std::runtime_error on a line it cannot read.
std::vector<ArchiveEntry> parse_tar_listing(const std::string& listing);
/// `zipinfo -l` output (Info-ZIP) as entries; throws std::runtime_error on a line it cannot read.
std::vector<ArchiveEntry> parse_zipinfo_listing(const std::string& listing);

/// The student's name of a submission's file or folder name ("ada.tar.gz" → "ada"), "" for what
/// is not a submission (a hidden file, another kind of file).
std::string student_of(const std::string& file_name);

/// Exit 0: every student graded (whatever their scores); 1: some submission could not be graded
/// (its row says why); 2: nothing could run (no such lab or folder).
int grade_class(const Paths& paths, const ClassOptions& options);

}  // namespace gpulab::cli
