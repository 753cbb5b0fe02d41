/// @file stage_checks.cpp
/// @brief The diagnosis, correctness, sanitizer, profile and integrity stages.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <set>
#include <sstream>

#include "base/process.hpp"
#include "grade/grade_stages.hpp"
#include "grade/profile.hpp"

namespace gpulab::cli {

std::vector<int> GradeContext::widths() const {
  if (!lab.distributed()) return {};
  return options.ranks.empty() ? lab.mpi_ranks : options.ranks;
}

int GradeContext::perf_width() const {
  if (!lab.distributed()) return 0;
  if (!options.ranks.empty()) return options.ranks.front();
  // Across a cluster the performance cases run one rank per node: what the links carry.
  if (options.nodes >= 2) return options.nodes;
  return lab.perf_ranks.empty() ? lab.mpi_ranks.front() : lab.perf_ranks.front();
}

bool stage_diagnosis(GradeContext& ctx, Scorecard& card) {
  // Informational, never a verdict: each kernel's registers, shared memory and spills.
  std::vector<KernelResources> reference;
  std::string error;
  const LabPart* part = ctx.lab.part(ctx.options.part);
  for (const std::string& f : ctx.lab.sources) {
    if (fs::path(f).extension() != ".cu") continue;
    if (part != nullptr && std::find(part->sources.begin(), part->sources.end(), f) == part->sources.end()) continue;
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
  // The cases the sanitizer runs, and their part (a lab in parts): none here (grade 04 --part 1),
  // no row — a row over no case would pass having checked nothing.
  std::set<int> parts;
  for (const CaseInfo& c : ctx.cases) {
    if (c.where == "gpu" && !c.perf() && !c.has_tag("big")) parts.insert(part_of(ctx.lab, c));
  }
  if (parts.empty()) return true;
  const std::string sanitizer = find_sanitizer();
  for (const char* tool : {"memcheck", "racecheck", "synccheck", "initcheck"}) {
    std::string why_not;
    if (sanitizer.empty()) why_not = "compute-sanitizer was not found: it comes with the full CUDA toolkit";
    else if (!ctx.gpu_missing.empty()) why_not = "needs a GPU: " + ctx.gpu_missing;
    else if (ctx.lab.distributed()) why_not = "not supported for distributed labs (one sanitizer per rank under mpirun)";
    Check c = why_not.empty() ? sanitize_with(ctx, sanitizer, tool) : Check::failure(std::string("sanitizer ") + tool, Kind::kSanitizer, why_not);
    if (!why_not.empty()) {
      c.where = Where::kGpu;
      c.status = Status::kNotRun;
    }
    if (!ctx.lab.parts.empty() && parts.size() == 1) c.data["part"] = *parts.begin();
    card.add(c);
  }
  return true;
}

namespace {

std::string find_ncu() {
  for (const char* candidate : {"ncu", "/usr/local/cuda/bin/ncu"}) {
    if (run_process({candidate, "--version"}, {}).exited(0)) return candidate;
  }
  return "";
}

/// The minimum bytes a case in profile mode prints: "gpulab-profile: min_bytes <N>".
double printed_min_bytes(const std::string& output) {
  const std::string key = "gpulab-profile: min_bytes ";
  const std::size_t at = output.find(key);
  return at == std::string::npos ? 0.0 : std::atof(output.c_str() + at + key.size());
}

/// One range: its case once under ncu, the kernels inside the range, judged.
Check profile_range(GradeContext& ctx, const std::string& ncu, const ProfileSpec& spec) {
  Check check;
  check.name = "profile " + spec.range;
  check.kind = Kind::kProfile;
  check.where = Where::kGpu;
  const fs::path csv = ctx.log_dir / ("ncu-" + ctx.next_stem() + ".csv");
  ProcessOptions o;
  o.timeout_s = 10 * ctx.case_timeout();
  o.env = {{"GPULAB_PROFILE", "1"}, {"GPULAB_SEED", std::to_string(ctx.seed)}};
  o.read_only = ctx.read_only;
  const ProcessResult r = run_process({ncu, "--csv", "--page", "raw", "--print-units", "base", "--nvtx", "--nvtx-include", spec.range + "/",
                                       "--metrics", kProfileMetrics, "--log-file", csv.string(), ctx.build().exe, spec.case_name},
                                      o);
  check.seconds = r.seconds;
  write_text(ctx.log_dir / (csv.stem().string() + ".log"), r.output);
  const std::string ncu_text = fs::exists(csv) ? read_text(csv) : "";
  if (ncu_lacks_permission(r.output + ncu_text)) {
    check.status = Status::kNotRun;
    check.details.push_back("ncu cannot read this GPU's counters (ERR_NVGPUCTRPERM): run as root, or allow profiling for all users "
                            "(NVreg_RestrictProfilingToAdminUsers=0); nothing was judged");
    return check;
  }
  if (!r.exited(0)) {
    check.details.push_back(spec.case_name + " under ncu: " + r.describe() + " (log: " + csv.string() + ")");
    return check;
  }
  const double min_bytes = printed_min_bytes(r.output);
  if (min_bytes <= 0) {
    check.details.push_back(spec.case_name + " printed no minimum (\"gpulab-profile: min_bytes N\"): the test's profile mode is missing");
    return check;
  }
  try {
    const ProfileVerdict v = judge_profile(parse_ncu_csv(ncu_text), spec.range, min_bytes, spec.max_kernels, spec.max_bytes_factor);
    check.status = v.ok ? Status::kPass : Status::kFail;
    check.details.push_back(v.summary);
    if (!v.ok) check.details.push_back(v.problem);
  } catch (const std::exception& e) {
    check.details.push_back(e.what());
  }
  return check;
}

}  // namespace

bool stage_profile(GradeContext& ctx, Scorecard& card) {
  if (!ctx.options.profile) return true;
  if (ctx.lab.profile.empty()) {
    Check c = Check::failure("profile", Kind::kProfile, "lab " + ctx.lab.number + " names no NVTX ranges to profile (lab.json \"profile\")");
    c.status = Status::kNotRun;
    card.add(c);
    return true;
  }
  const std::string ncu = find_ncu();
  for (const ProfileSpec& spec : ctx.lab.profile) {
    std::string why_not;
    if (ncu.empty()) why_not = "Nsight Compute (ncu) was not found: it comes with the full CUDA toolkit";
    else if (!ctx.gpu_missing.empty()) why_not = "needs a GPU: " + ctx.gpu_missing;
    if (!why_not.empty()) {
      Check c = Check::failure("profile " + spec.range, Kind::kProfile, why_not);
      c.where = Where::kGpu;
      c.status = Status::kNotRun;
      card.add(c);
      continue;
    }
    card.add(profile_range(ctx, ncu, spec));
    if (!untampered(ctx, card)) return false;
  }
  return true;
}

void arm_guard(GradeContext& ctx) {
  std::vector<fs::path> artefacts;
  for (const std::string& f : ctx.lab.build.grader_files) artefacts.emplace_back(f);
  if (const Variant* emu_ref = ctx.lab.build.variant("emu_ref"); emu_ref != nullptr && fs::exists(emu_ref->exe)) artefacts.emplace_back(emu_ref->exe);
  const std::vector<fs::path> documents = {ctx.paths.state_dir() / "progress.json", ctx.paths.state_dir() / "hints.json"};
  ctx.guard = TreeGuard(artefacts, {ctx.lab.tests, ctx.lab.solutions}, documents, ctx.paths.build / "grade" / ("snapshot-" + ctx.lab.number));
  if (!ctx.options.sandbox) return;
  for (const fs::path& p : artefacts) ctx.read_only.push_back(p.string());
  for (const fs::path& p : documents) ctx.read_only.push_back(p.string());
  for (const fs::path& p : {ctx.lab.tests, ctx.lab.solutions, ctx.paths.build / "labinfo"}) ctx.read_only.push_back(p.string());
}

bool untampered(GradeContext& ctx, Scorecard& card) {
  if (!ctx.guard.armed()) return true;
  const std::string change = ctx.guard.check_and_repair();
  if (change.empty()) return true;
  card.add(Check::failure("the grader's files unchanged", Kind::kIntegrity,
                          change + " while the code under test ran: tampering, so the grade stops here (it was put back)",
                          "the code of a lab reads and writes only the buffers it is given"));
  return false;
}

bool stage_integrity(GradeContext& ctx, Scorecard& card) {
  if (!untampered(ctx, card)) return true;
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
