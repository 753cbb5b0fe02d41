/// @file reference_profile.hpp
/// @brief What the reference did on each case: how many assertions it made and how long it took,
/// cached per reference build (build/grade/profiles/NN.json, keyed by the hash of the reference's
/// executable). The grader measures a submission against it: a passing case that made fewer
/// assertions than the reference did not run to its end, and each case's time limit is derived
/// from the reference's own time, so a hang costs seconds, not minutes.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "base/files.hpp"

namespace gpulab::cli {

/// One case at one width (and on the emulator or not), as the reference ran it.
struct ReferenceRun {
  long assertions = -1;      ///< summed over ranks; -1: unknown
  double seconds = 0.0;      ///< wall time of the process (of mpirun, for W ranks)
  std::uint64_t seed = 0;    ///< the seed it ran with
};

/// The time limit for a case the reference ran in @p reference_s: 10 × that + 5 s, at least
/// @p floor_s, at most @p cap_s (the lab's limit).
double derived_limit(double reference_s, double floor_s, double cap_s);
/// The limit's rule in words, for the scorecard: "10 × the reference's 0.4 s + 5 s, at least 10 s, at most 120 s".
std::string describe_limit(double reference_s, double floor_s, double cap_s);

class ReferenceProfile {
 public:
  ReferenceProfile() = default;
  /// Loads @p file if it was made for the reference build whose hash is @p build_hash.
  ReferenceProfile(fs::path file, std::string build_hash);
  /// The key of a case at width @p ranks (0: not distributed), emulated or not.
  static std::string key(const std::string& case_name, int ranks, bool emulated);
  const ReferenceRun* find(const std::string& key) const;
  void put(const std::string& key, const ReferenceRun& run);
  /// Writes the file (when anything was added).
  void save() const;

 private:
  fs::path file_;
  std::string build_hash_;
  std::map<std::string, ReferenceRun> runs_;
  bool dirty_ = false;
};

/// The FNV-1a hash of a (large) file, read in chunks; "" when it cannot be read.
std::string file_hash(const fs::path& file);

}  // namespace gpulab::cli
