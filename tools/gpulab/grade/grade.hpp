/// @file grade.hpp
/// @brief `gpulab grade NN`: a pipeline of stages over one lab, each adding its checks to one
/// scorecard (scorecard.hpp):
///
///   sources      the submission's files are there; a snapshot of them in the build tree
///   build        compile the learner's objects, look for forbidden library code (nm), link
///   diagnosis    registers, shared memory and spills per kernel (ptxas), beside the reference's
///   correctness  every test case the reference lists, each in its own process with a time limit
///   sanitizer    (--sanitize) the [gpu] cases, small, under compute-sanitizer's four tools
///   profile      (--profile) the lab's NVTX ranges under Nsight Compute: kernels and bytes moved
///   performance  learner and reference alternated, medians against the lab's thresholds
///   integrity    the sources and the reference left as they were
///
/// A stage that cannot go on (the build failed) ends the pipeline; the scorecard is printed as it
/// fills. Exit codes: 0 every check ran and passed; 1 something failed; 2 nothing failed but some
/// checks could not run here (no GPU, not enough memory).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/paths.hpp"
#include "grade/scorecard.hpp"

namespace gpulab::cli {

struct GradeOptions {
  std::string lab;                 ///< "01", "1" or "01-hello-kernel"
  std::string submission;          ///< a folder with the lab's file names; "" = labs/NN-slug
  bool solutions = false;          ///< grade the reference (instructor)
  std::string json_path;           ///< write the scorecard as JSON here
  std::string format;              ///< "gradescope" or "junit": also write the points in that format to out_path
  std::string out_path;            ///< where --format writes
  std::optional<std::uint64_t> seed;
  int rounds = 3;                  ///< performance: at least this many learner/reference alternations
  int max_rounds = 10;             ///< and at most this many (more while noisy or near the threshold)
  double perf_time_cap_s = 120.0;  ///< per performance check
  bool quiet = false;              ///< print only failures and the result line
  bool verbose = false;            ///< also print the facts every case checked that held, with their figures
  double timeout_s = 0;            ///< per test case; 0 = the lab's own limit
  std::vector<std::string> cases;  ///< run only these test cases (exact names); empty = all
  int part = 0;                    ///< a lab in parts: grade only part k (from 1); 0 = the whole lab
  std::vector<int> ranks;          ///< distributed labs: these widths W; empty = the lab's list
  bool sanitize = false;           ///< also run the [gpu] cases, made small, under compute-sanitizer
  bool profile = false;            ///< also run the lab's profiled cases under Nsight Compute (profile.hpp)
  int nodes = 0;                   ///< distributed labs: > 0 places the ranks across `cluster up --nodes N` (cluster.hpp)
  std::string link_rate;           ///< with nodes: the rate the cluster must have
  std::vector<std::string> faults; ///< with nodes: "link-down:NODE@S" / "kill:RANK@S" injected into every distributed run
  std::string hostfile;            ///< distributed labs: a real cluster's OpenMPI hostfile; mpirun reaches its hosts over ssh
  std::string launcher;            ///< distributed labs: "local", "hostfile" (with hostfile), "slurm" (mpirun inside the allocation); "" = detected
  bool sandbox = true;             ///< run the code under test in bubblewrap under gpulab-launch's seccomp filter
};

struct GradeResult {
  int exit_code = 1;
  std::string lab;      ///< the slug; "" when no lab was found
  std::string sources;  ///< what was graded, relative to the tree
  std::uint64_t seed = 0;
  Scorecard card;
  std::string not_run_reason;
  nlohmann::json confinement;  ///< how the code under test ran: sandboxed, seccomp, and why not (null before any ran)
  const std::vector<Check>& checks() const { return card.checks(); }
  nlohmann::json to_json() const;
};

GradeResult grade(const Paths& paths, const GradeOptions& options);

}  // namespace gpulab::cli
