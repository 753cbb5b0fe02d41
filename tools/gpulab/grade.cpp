/// @file grade.cpp
/// @brief The grading pipeline: find the lab, choose the sources, run the stages (grade.hpp).
#include "grade.hpp"

#include <iostream>
#include <random>

#include "grade_stages.hpp"

namespace gpulab::cli {
namespace {

std::uint64_t fresh_seed() {
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 20) ^ device();
}

/// Chooses the sources, prints the header, prepares the log folder; false when it cannot grade.
bool prepare(GradeContext& ctx, GradeResult& result) {
  std::cout << "gpulab grade " << ctx.lab.number << " · " << ctx.lab.title << '\n';
  const BuildInfo& b = ctx.lab.build;
  if (!b.configured) {
    std::cout << "  the build tree " << ctx.paths.build << " is not configured: run ./gpulab (it configures)\n";
    return false;
  }
  if (!b.buildable) {
    result.not_run_reason = b.reason;
    Check c = Check::failure("build", Kind::kBuild, "lab " + ctx.lab.number + " cannot be built here: " + b.reason,
                             "run ./gpulab doctor to see what is missing");
    c.status = Status::kNotRun;
    result.card.add(c);
    return false;
  }
  const GradeOptions& o = ctx.options;
  ctx.sources = o.solutions ? Sources::kReference : !o.submission.empty() ? Sources::kSubmission : Sources::kLab;
  ctx.variant = o.solutions ? "ref" : !o.submission.empty() ? "sub" : "lab";
  ctx.source_dir = o.solutions ? ctx.lab.solutions : !o.submission.empty() ? fs::absolute(o.submission) : ctx.lab.labs;
  ctx.compiled_dir = ctx.sources == Sources::kSubmission ? b.submission_dir : ctx.source_dir;
  result.sources = fs::relative(ctx.source_dir, ctx.paths.root).string();
  if (result.sources.rfind("..", 0) == 0) result.sources = ctx.source_dir.string();
  const char* role = ctx.sources == Sources::kLab ? "  (your working copy)" : ctx.sources == Sources::kReference ? "  (reference)" : "  (submission)";
  std::cout << "  sources  " << result.sources << role << '\n'
            << "  seed     " << ctx.seed << "  (reproduce: ./gpulab grade " << ctx.lab.number << " --seed " << ctx.seed << ")\n";
  ctx.log_dir = ctx.paths.build / "grade" / ctx.lab.number;
  fs::remove_all(ctx.log_dir);
  fs::create_directories(ctx.log_dir);
  std::cout << "  logs     " << fs::relative(ctx.log_dir, ctx.paths.root).string() << "/\n\n";
  // What grading must leave as it is, hashed before any learner code runs (stage_integrity).
  ctx.before_labs = hash_tree(ctx.lab.labs);
  ctx.before_solutions = hash_tree(ctx.lab.solutions);
  if (ctx.sources == Sources::kSubmission) ctx.before_submission = hash_tree(ctx.source_dir);
  return true;
}

}  // namespace

nlohmann::json GradeResult::to_json() const {
  nlohmann::json j = card.to_json();
  j["lab"] = lab;
  j["sources"] = sources;
  j["seed"] = seed;
  if (!not_run_reason.empty()) j["not_run_reason"] = not_run_reason;
  return j;
}

GradeResult grade(const Paths& paths, const GradeOptions& options) {
  GradeResult result{1, "", "", 0, Scorecard(options.quiet), ""};
  const std::optional<LabConfig> lab = find_lab(paths, options.lab);
  if (!lab) {
    std::cout << "gpulab grade: no lab \"" << options.lab << "\". Labs:";
    for (const LabConfig& l : discover_labs(paths)) std::cout << " " << l.number;
    std::cout << "\n";
    return result;
  }
  GradeContext ctx{paths, options, *lab};
  ctx.seed = options.seed ? *options.seed : fresh_seed();
  result.lab = lab->slug;
  result.seed = ctx.seed;
  if (prepare(ctx, result)) {
    using StageFn = bool (*)(GradeContext&, Scorecard&);
    for (StageFn stage : {stage_sources, stage_build, stage_diagnosis, stage_correctness, stage_sanitizer, stage_profile, stage_performance}) {
      if (!stage(ctx, result.card)) break;
    }
    stage_integrity(ctx, result.card);
    result.not_run_reason = ctx.gpu_missing.empty() ? result.not_run_reason : ctx.gpu_missing;
  }
  result.exit_code = result.card.exit_code();
  result.card.print_summary(result.not_run_reason);
  if (!options.json_path.empty()) write_text(options.json_path, result.to_json().dump(2) + "\n");
  return result;
}

}  // namespace gpulab::cli
