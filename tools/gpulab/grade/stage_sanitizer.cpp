/// @file stage_sanitizer.cpp
/// @brief The sanitizer stage (--sanitize): compute-sanitizer's four tools over every small [gpu] correctness case
/// (not the cases that time something: under the tools' slowdown their comparisons mean nothing).
#include <set>
#include <sstream>

#include "base/process.hpp"
#include "grade/grade_stages.hpp"

namespace gpulab::cli {

std::vector<std::string> sanitizer_findings(const std::string& output, int keep) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line) && static_cast<int>(lines.size()) < keep;) {
    if (line.rfind("========= ", 0) == 0 && line.find("ERROR SUMMARY") == std::string::npos) lines.push_back("  " + line.substr(10));
  }
  return lines;
}

std::string sanitizer_hint(const std::string& tool) {
  if (tool == "racecheck") return "two threads touch the same shared-memory word without a __syncthreads() between them";
  if (tool == "memcheck") return "an access outside an allocation: check every index against its bound";
  if (tool == "synccheck") return "a __syncthreads() that not every thread of the block reaches";
  return "memory read before anything was written to it";
}

bool sanitizable(const CaseInfo& c) { return c.where == "gpu" && !c.measures() && !c.has_tag("big"); }

namespace {

std::string find_sanitizer() {
  for (const char* candidate : {"compute-sanitizer", "/usr/local/cuda/bin/compute-sanitizer"}) {
    if (run_process({candidate, "--version"}, {}).exited(0)) return candidate;
  }
  return "";
}

/// One tool over every small [gpu] correctness case.
Check sanitize_with(const GradeInputs& in, const Correctness& correct, LearnerRuns& runs, const std::string& sanitizer, const std::string& tool) {
  Check check;
  check.name = "sanitizer " + tool;
  check.kind = Kind::kSanitizer;
  check.where = Where::kGpu;
  check.status = Status::kPass;
  for (const CaseInfo& c : correct.cases) {
    if (!sanitizable(c)) continue;
    ProcessOptions o;
    o.timeout_s = 10 * in.case_timeout();
    o.env = {{"GPULAB_SMALL", "1"}, {"GPULAB_SEED", std::to_string(in.seed)}};
    // compute-sanitizer starts the program itself: sandboxed, without gpulab-launch's filter.
    Sandbox box;
    if (runs.confinement().sandbox) {
      box = *runs.confinement().sandbox;
      box.show.push_back(in.build().exe);
      o.sandbox = &box;
    }
    const ProcessResult r = run_process(
        {sanitizer, "--tool", tool, "--error-exitcode", "86", "--print-limit", "1", in.build().exe, c.name, "--reporter", "compact"}, o);
    check.seconds += r.seconds;
    write_text(in.log_dir / ("sanitizer-" + tool + "-" + runs.next_stem() + ".log"), r.output);
    if (r.exited(0)) continue;
    check.status = Status::kFail;
    if (r.exited(86)) {
      check.details.push_back(c.name + ":");
      for (const std::string& line : sanitizer_findings(r.output)) check.details.push_back(line);
    } else {
      check.details.push_back(c.name + ": " + r.describe() + " under " + tool);
    }
  }
  if (check.status == Status::kFail) check.hints.push_back(sanitizer_hint(tool));
  return check;
}

}  // namespace

bool stage_sanitizer(const GradeInputs& in, const Built& built, const Correctness& correct, LearnerRuns& runs, Scorecard& card) {
  if (!in.options.sanitize) return true;
  // The cases the sanitizer runs, and their part (a lab in parts): none here (grade 04 --part 1),
  // no row — a row over no case would pass having checked nothing.
  std::set<int> parts;
  for (const CaseInfo& c : correct.cases) {
    if (sanitizable(c)) parts.insert(part_of(in.lab, c));
  }
  if (parts.empty()) return true;
  const std::string sanitizer = find_sanitizer();
  for (const char* tool : {"memcheck", "racecheck", "synccheck", "initcheck"}) {
    std::string why_not;
    if (sanitizer.empty()) why_not = "compute-sanitizer was not found: it comes with the full CUDA toolkit";
    else if (!built.gpu_missing.empty()) why_not = "needs a GPU: " + built.gpu_missing;
    else if (in.lab.distributed()) why_not = "not supported for distributed labs (one sanitizer per rank under mpirun)";
    Check c = why_not.empty() ? sanitize_with(in, correct, runs, sanitizer, tool) : Check::failure(std::string("sanitizer ") + tool, Kind::kSanitizer, why_not);
    if (!why_not.empty()) {
      c.where = Where::kGpu;
      c.status = Status::kNotRun;
    }
    if (!in.lab.parts.empty() && parts.size() == 1) c.data["part"] = *parts.begin();
    card.add(c);
  }
  return true;
}

}  // namespace gpulab::cli
