/// @file stage_correctness.cpp
/// @brief The correctness stage: every case the reference lists, each run in its own process (on
/// the CPU emulator where a [gpu] case cannot run natively), measured against what the reference
/// did on the same case: its assertions and its time.
#include <algorithm>

#include "base/process.hpp"
#include "grade/emulation.hpp"
#include "grade/grade_stages.hpp"

namespace gpulab::cli {
namespace {

/// Floor of a derived limit: process start, MPI start-up and a loaded machine.
constexpr double kLimitFloorS = 10.0;

/// The cases the reference lists (the submission's binary cannot choose them), narrowed to --case.
bool list_cases(GradeContext& ctx, Scorecard& card) {
  ProcessOptions o;
  o.timeout_s = 60;
  const ProcessResult listed = run_process({ctx.reference().exe, "--gpulab-list"}, o);
  ctx.cases = parse_case_list(listed.exited(0) ? listed.output : "");
  if (ctx.cases.empty()) {
    card.add(Check::failure("list test cases", Kind::kBuild, listed.exited(0) ? "no test cases" : listed.describe() + ": " + listed.output));
    return false;
  }
  if (ctx.options.part > 0) {
    // A part's cases: those its test files define (lab.json "parts").
    std::vector<CaseInfo> in_part;
    for (const CaseInfo& c : ctx.cases) {
      if (part_of(ctx.lab, c) == ctx.options.part) in_part.push_back(c);
    }
    if (in_part.empty()) {
      card.add(Check::failure("--part " + std::to_string(ctx.options.part), Kind::kBuild,
                              "no test case of lab " + ctx.lab.number + " is in this part (the listing names no test file: rebuild with ./gpulab)"));
      return false;
    }
    ctx.cases = in_part;
  }
  if (ctx.options.cases.empty()) return true;
  std::vector<CaseInfo> chosen;
  for (const std::string& name : ctx.options.cases) {
    const std::vector<CaseInfo> found = cases_named(ctx.cases, name);
    if (found.size() != 1) {
      // A usage error, not a verdict on the code: N/A (exit 2), with the names to choose from.
      Check c = Check::failure("--case " + name, Kind::kBuild,
                               found.empty() ? "lab " + ctx.lab.number + " has no test case whose name holds that; its cases:"
                                             : std::to_string(found.size()) + " cases of lab " + ctx.lab.number + " hold that; say which:");
      for (const CaseInfo& named : found.empty() ? ctx.cases : found) c.details.push_back("  " + named.name);
      c.status = Status::kNotRun;
      c.data["usage"] = true;  // the summary says so instead of blaming the machine
      card.add(c);
      return false;
    }
    chosen.push_back(found.front());
  }
  ctx.cases = chosen;
  return true;
}

/// Runs @p c on @p exe (natively, or on the emulator) and judges it.
Check run_and_judge(GradeContext& ctx, const CaseInfo& c, const std::string& exe, int w, bool emulated, const JudgeContext& judge) {
  RunSpec spec{exe, c.name, w, judge.timeout_s, ctx.seed, ctx.log_dir, ctx.next_stem(), {}, ctx.read_only};
  return emulated ? emulate_case(c, exe, ctx.lab, spec, judge) : judge_case(c, run_case(spec), ctx.lab, judge);
}

/// What the reference did on @p c at @p w, from the profile, or run now with this grade's seed
/// (@p this_seed: run again unless the profile's run had this seed). Null when it did not pass.
const ReferenceRun* reference_run(GradeContext& ctx, const CaseInfo& c, int w, bool emulated, bool this_seed) {
  ReferenceProfile& profile = emulated ? ctx.emu_profile : ctx.profile;
  const std::string key = ReferenceProfile::key(c.name, w, emulated);
  const ReferenceRun* known = profile.find(key);
  if (known != nullptr && (!this_seed || known->seed == ctx.seed)) return known;
  const std::string exe = ctx.lab.build.variant(emulated ? "emu_ref" : "ref")->exe;
  JudgeContext judge;
  judge.timeout_s = ctx.lab.timeout_s;
  judge.gpu_missing = ctx.gpu_missing;
  const Check ran = run_and_judge(ctx, c, exe, w, emulated, judge);
  if (ran.status != Status::kPass && ran.status != Status::kEmuPass) return known;
  profile.put(key, {ran.data.value("assertions", -1L), ran.seconds / (emulated ? 2.0 : 1.0), ctx.seed});
  return profile.find(key);
}

/// One case at one width: the learner's run, judged against the reference's.
Check graded_case(GradeContext& ctx, const CaseInfo& c, int w, bool emulated) {
  JudgeContext judge;
  judge.gpu_missing = ctx.gpu_missing;
  const std::string exe = emulated ? ctx.lab.build.variant(ctx.emulator)->exe : ctx.build().exe;
  if (ctx.graded_is_reference()) {
    judge.timeout_s = ctx.case_timeout();
    Check check = run_and_judge(ctx, c, exe, w, emulated, judge);
    if (check.status == Status::kPass || check.status == Status::kEmuPass) {
      (emulated ? ctx.emu_profile : ctx.profile)
          .put(ReferenceProfile::key(c.name, w, emulated), {check.data.value("assertions", -1L), check.seconds / (emulated ? 2.0 : 1.0), ctx.seed});
    }
    return check;
  }
  const ReferenceRun* reference = reference_run(ctx, c, w, emulated, false);
  judge.timeout_s = ctx.options.timeout_s > 0 ? ctx.options.timeout_s : ctx.limit_for(reference);
  judge.reference_assertions = reference != nullptr ? reference->assertions : -1;
  Check check = run_and_judge(ctx, c, exe, w, emulated, judge);
  if (check.data.value("fewer_assertions", false) && reference->seed != ctx.seed) {
    // The cached count came from another seed: count the reference's checks on this one.
    reference = reference_run(ctx, c, w, emulated, true);
    judge.reference_assertions = reference != nullptr ? reference->assertions : -1;
    check = run_and_judge(ctx, c, exe, w, emulated, judge);
  }
  if (check.data.value("hung", false) && !emulated && reference != nullptr && ctx.options.timeout_s <= 0) {
    check.details.front() += " (the limit: " + describe_limit(reference->seconds, kLimitFloorS, ctx.case_timeout()) + ")";
  }
  return check;
}

/// A [gpu] case where there is no GPU: on the emulator, or why it could not be.
Check emulated(GradeContext& ctx, const CaseInfo& c) {
  if (!ctx.emulator.empty()) return graded_case(ctx, c, 0, true);
  Check check = Check::failure(c.name, Kind::kCorrectness, "needs a GPU: " + ctx.gpu_missing);
  check.where = Where::kGpu;
  check.status = Status::kEmuNotRun;
  if (!ctx.emulator_problem.empty()) check.details.push_back(ctx.emulator_problem);
  return check;
}

Check not_run_after_hang(const CaseInfo& c, int w) {
  Check check = Check::failure(c.name + " (W=" + std::to_string(w) + ")", Kind::kCorrectness,
                               "not run: an earlier case hung at W = " + std::to_string(w));
  check.where = where_from_string(c.where);
  check.status = Status::kNotRun;
  return check;
}

}  // namespace

double GradeContext::limit_for(const ReferenceRun* reference) const {
  return reference == nullptr ? case_timeout() : derived_limit(reference->seconds, kLimitFloorS, case_timeout());
}

bool stage_correctness(GradeContext& ctx, Scorecard& card) {
  if (!list_cases(ctx, card)) return false;
  const std::vector<int> widths = ctx.widths().empty() ? std::vector<int>{0} : ctx.widths();
  for (const CaseInfo& c : ctx.cases) {
    if (c.perf()) continue;
    if (!ctx.gpu_missing.empty() && emulable(c) && ctx.lab.build.emulated()) {
      Check check = emulated(ctx, c);
      mark_stretch(c, check);
      if (!ctx.lab.parts.empty()) check.data["part"] = part_of(ctx.lab, c);
      card.add(check);
      if (!untampered(ctx, card)) return false;
      continue;
    }
    // A case whose tests compute the same on every rank at every width ([any-width]: pure
    // functions such as a partition or a schedule's lists) runs at the first width only.
    const std::vector<int> case_widths = c.has_tag("any-width") ? std::vector<int>{widths.front()} : widths;
    for (int w : case_widths) {
      if (ctx.hung_widths.count(w)) {
        card.add(not_run_after_hang(c, w));
        continue;
      }
      Check check = graded_case(ctx, c, w, false);
      if (w > 0 && check.data.value("hung", false)) ctx.hung_widths.insert(w);
      if (w > 0) check.name += " (W=" + std::to_string(w) + ")";
      mark_stretch(c, check);
      if (!ctx.lab.parts.empty()) check.data["part"] = part_of(ctx.lab, c);
      card.add(check);
      if (!untampered(ctx, card)) return false;
    }
  }
  ctx.profile.save();
  ctx.emu_profile.save();
  return true;
}

}  // namespace gpulab::cli
