/// @file stage_checks.cpp
/// @brief The diagnosis, correctness, sanitizer and integrity stages.
#include <algorithm>
#include <iostream>
#include <sstream>

#include "emulation.hpp"
#include "grade_stages.hpp"
#include "process.hpp"

namespace gpulab::cli {

std::vector<int> GradeContext::widths() const {
  if (!lab.distributed()) return {};
  return options.ranks.empty() ? lab.mpi_ranks : options.ranks;
}

int GradeContext::perf_width() const {
  if (!lab.distributed()) return 0;
  if (!options.ranks.empty()) return options.ranks.front();
  return lab.perf_ranks.empty() ? lab.mpi_ranks.front() : lab.perf_ranks.front();
}

bool stage_diagnosis(GradeContext& ctx, Scorecard& card) {
  // Informational, never a verdict: each kernel's registers, shared memory and spills.
  std::vector<KernelResources> reference;
  std::string error;
  for (const std::string& f : ctx.lab.sources) {
    if (fs::path(f).extension() != ".cu") continue;
    for (auto& k : kernel_resources(ctx.paths.build, ctx.compiled_dir / f, error)) ctx.ptxas.push_back(k);
    if (ctx.graded_is_reference()) continue;
    for (auto& k : kernel_resources(ctx.paths.build, ctx.lab.solutions / f, error)) reference.push_back(k);
  }
  if (ctx.ptxas.empty() && error.empty()) return true;
  Check c;
  c.name = "resources per kernel (ptxas)";
  c.kind = Kind::kDiagnosis;
  c.status = Status::kInfo;
  if (ctx.ptxas.empty()) {
    c.details.push_back("not available: " + error);
  } else {
    describe_resources(ctx.ptxas, reference, c.details, c.hints);
  }
  if (ctx.options.quiet) {
    card.keep(c);
  } else {
    card.add(c);
  }
  return true;
}

namespace {

/// A [gpu] case where there is no GPU: on the emulator, or why it could not be.
Check emulated(GradeContext& ctx, const CaseInfo& c) {
  RunSpec spec{"", c.name, 0, ctx.case_timeout(), ctx.seed, ctx.log_dir, ctx.next_stem(), {}};
  Check check;
  if (!ctx.emulator.empty()) {
    check = emulate_case(c, ctx.lab.build.variant(ctx.emulator)->exe, ctx.lab, spec);
  } else {
    check = Check::failure(c.name, Kind::kCorrectness, "needs a GPU: " + ctx.gpu_missing);
    check.where = Where::kGpu;
    check.status = Status::kEmuNotRun;
    check.details.push_back(ctx.emulator_problem);
  }
  mark_stretch(c, check);
  return check;
}

}  // namespace

bool stage_correctness(GradeContext& ctx, Scorecard& card) {
  // The cases come from the reference's executable: the submission's binary cannot choose them.
  ProcessOptions o;
  o.timeout_s = 60;
  const ProcessResult listed = run_process({ctx.reference().exe, "--gpulab-list"}, o);
  ctx.cases = parse_case_list(listed.exited(0) ? listed.output : "");
  if (ctx.cases.empty()) {
    card.add(Check::failure("list test cases", Kind::kBuild, listed.exited(0) ? "no test cases" : listed.describe() + ": " + listed.output));
    return false;
  }
  if (!ctx.options.cases.empty()) {
    std::vector<CaseInfo> chosen;
    for (const std::string& name : ctx.options.cases) {
      const auto it = std::find_if(ctx.cases.begin(), ctx.cases.end(), [&](const CaseInfo& c) { return c.name == name; });
      if (it == ctx.cases.end()) {
        std::string names;
        for (const CaseInfo& c : ctx.cases) names += "\n  " + c.name;
        card.add(Check::failure("--case " + name, Kind::kBuild, "lab " + ctx.lab.number + " has no test case of that name; its cases:" + names));
        return false;
      }
      chosen.push_back(*it);
    }
    ctx.cases = chosen;
  }
  const std::vector<int> widths = ctx.widths().empty() ? std::vector<int>{0} : ctx.widths();
  for (const CaseInfo& c : ctx.cases) {
    if (c.perf()) continue;
    if (!ctx.gpu_missing.empty() && emulable(c) && ctx.lab.build.emulated()) {
      card.add(emulated(ctx, c));
      continue;
    }
    for (int w : widths) {
      RunSpec spec{ctx.build().exe, c.name, w, ctx.case_timeout(), ctx.seed, ctx.log_dir, ctx.next_stem(), {}};
      Check check = judge_case(c, run_case(spec), ctx.lab, spec.timeout_s);
      if (w > 0) check.name += " (W=" + std::to_string(w) + ")";
      mark_stretch(c, check);
      card.add(check);
    }
  }
  return true;
}

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

namespace {

std::string find_sanitizer() {
  for (const char* candidate : {"compute-sanitizer", "/usr/local/cuda/bin/compute-sanitizer"}) {
    if (run_process({candidate, "--version"}, {}).exited(0)) return candidate;
  }
  return "";
}

/// One tool over every small [gpu] correctness case.
Check sanitize_with(GradeContext& ctx, const std::string& sanitizer, const std::string& tool) {
  Check check;
  check.name = "sanitizer " + tool;
  check.kind = Kind::kSanitizer;
  check.where = Where::kGpu;
  check.status = Status::kPass;
  for (const CaseInfo& c : ctx.cases) {
    if (c.where != "gpu" || c.perf() || c.has_tag("big")) continue;
    ProcessOptions o;
    o.timeout_s = 10 * ctx.case_timeout();
    o.env = {{"GPULAB_SMALL", "1"}, {"GPULAB_SEED", std::to_string(ctx.seed)}};
    const ProcessResult r = run_process(
        {sanitizer, "--tool", tool, "--error-exitcode", "86", "--print-limit", "1", ctx.build().exe, c.name, "--reporter", "compact"}, o);
    check.seconds += r.seconds;
    write_text(ctx.log_dir / ("sanitizer-" + tool + "-" + ctx.next_stem() + ".log"), r.output);
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

bool stage_sanitizer(GradeContext& ctx, Scorecard& card) {
  if (!ctx.options.sanitize) return true;
  const std::string sanitizer = find_sanitizer();
  for (const char* tool : {"memcheck", "racecheck", "synccheck", "initcheck"}) {
    std::string why_not;
    if (sanitizer.empty()) why_not = "compute-sanitizer was not found: it comes with the full CUDA toolkit";
    else if (!ctx.gpu_missing.empty()) why_not = "needs a GPU: " + ctx.gpu_missing;
    else if (ctx.lab.distributed()) why_not = "not supported for distributed labs (one sanitizer per rank under mpirun)";
    if (why_not.empty()) {
      card.add(sanitize_with(ctx, sanitizer, tool));
      continue;
    }
    Check c = Check::failure(std::string("sanitizer ") + tool, Kind::kSanitizer, why_not);
    c.where = Where::kGpu;
    c.status = Status::kNotRun;
    card.add(c);
  }
  return true;
}

bool stage_integrity(GradeContext& ctx, Scorecard& card) {
  // Grading never changes the learner's files or the reference.
  std::string change = first_tree_change(ctx.before_labs, hash_tree(ctx.lab.labs), "labs/" + ctx.lab.slug + "/");
  if (change.empty()) change = first_tree_change(ctx.before_solutions, hash_tree(ctx.lab.solutions), "solutions/" + ctx.lab.slug + "/");
  if (change.empty() && ctx.sources == Sources::kSubmission) {
    change = first_tree_change(ctx.before_submission, hash_tree(ctx.source_dir), ctx.source_dir.string() + "/");
  }
  if (!change.empty()) {
    card.add(Check::failure("sources unchanged by grading", Kind::kIntegrity, change + " while grading"));
  }
  return true;
}

}  // namespace gpulab::cli
