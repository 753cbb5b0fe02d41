/// @file stage_correctness.cpp
/// @brief The correctness stage: every case the reference lists, each run in its own process (on
/// the CPU emulator where a [gpu] case cannot run natively), measured against what the reference
/// did on the same case: its assertions and its time.
#include <algorithm>

#include "base/process.hpp"
#include "grade/emulation.hpp"
#include "grade/grade_stages.hpp"
#include "grade/outputs.hpp"

namespace gpulab::cli {
namespace {

/// Floor of a derived limit: process start, MPI start-up and a loaded machine.
constexpr double kLimitFloorS = 10.0;

/// The cases the reference lists (the submission's binary cannot choose them), narrowed to --case.
std::optional<std::vector<CaseInfo>> list_cases(const GradeInputs& in, Scorecard& card) {
  ProcessOptions o;
  o.timeout_s = 60;
  const ProcessResult listed = run_process({in.reference().exe, "--gpulab-list"}, o);
  std::vector<CaseInfo> cases = parse_case_list(listed.exited(0) ? listed.output : "");
  if (cases.empty()) {
    card.add(Check::failure("list test cases", Kind::kBuild, listed.exited(0) ? "no test cases" : listed.describe() + ": " + listed.output));
    return std::nullopt;
  }
  if (in.options.part > 0) {
    // A part's cases: those its test files define (lab.json "parts").
    std::vector<CaseInfo> in_part;
    for (const CaseInfo& c : cases) {
      if (part_of(in.lab, c) == in.options.part) in_part.push_back(c);
    }
    if (in_part.empty()) {
      card.add(Check::failure("--part " + std::to_string(in.options.part), Kind::kBuild,
                              "no test case of lab " + in.lab.number + " is in this part (the listing names no test file: rebuild with ./gpulab)"));
      return std::nullopt;
    }
    cases = in_part;
  }
  if (in.options.cases.empty()) return cases;
  std::vector<CaseInfo> chosen;
  for (const std::string& name : in.options.cases) {
    const std::vector<CaseInfo> found = cases_named(cases, name);
    if (found.size() != 1) {
      // A usage error, not a verdict on the code: N/A (exit 2), with the names to choose from.
      Check c = Check::failure("--case " + name, Kind::kBuild,
                               found.empty() ? "lab " + in.lab.number + " has no test case whose name holds that; its cases:"
                                             : std::to_string(found.size()) + " cases of lab " + in.lab.number + " hold that; say which:");
      for (const CaseInfo& named : found.empty() ? cases : found) c.details.push_back("  " + named.name);
      c.status = Status::kNotRun;
      c.data["usage"] = true;  // the summary says so instead of blaming the machine
      card.add(c);
      return std::nullopt;
    }
    chosen.push_back(found.front());
  }
  return chosen;
}

/// Runs @p c on @p exe (natively, or on the emulator) and judges it; @p outputs: which of its
/// checks' values come back (RunSpec::outputs). @p trusted: the reference's own run while a
/// submission is graded, which holds no learner code: under gpulab-launch and its filter like
/// every run, but outside bubblewrap (whose 12-15 ms a process were most of the sandbox's cost).
Check run_and_judge(const GradeInputs& in, LearnerRuns& runs, const CaseInfo& c, const std::string& exe, int w, bool emulated,
                    const JudgeContext& judge, const std::string& outputs = "", bool trusted = false) {
  Confinement unboxed;
  const Confinement* confine = &runs.confinement();
  if (trusted) {
    unboxed = runs.confinement();
    unboxed.sandbox.reset();
    confine = &unboxed;
  }
  RunSpec spec{exe, c.name, w, judge.timeout_s, in.seed, in.log_dir, runs.next_stem(), {}, confine, outputs};
  return emulated ? emulate_case(c, exe, in.lab, spec, judge) : judge_case(c, run_case(spec), in.lab, judge);
}

/// What the reference did on @p c at @p w, from the profile, or run now with this grade's seed
/// (@p this_seed: run again unless the profile's run had this seed). Null when it did not pass.
const ReferenceRun* reference_run(const GradeInputs& in, Built& built, LearnerRuns& runs, const CaseInfo& c, int w, bool emulated, bool this_seed) {
  ReferenceProfile& profile = emulated ? built.emu_profile : built.profile;
  const std::string key = ReferenceProfile::key(c.name, w, emulated);
  const ReferenceRun* known = profile.find(key);
  if (known != nullptr && (!this_seed || known->seed == in.seed)) return known;
  const std::string exe = in.lab.build.variant(emulated ? "emu_ref" : "ref")->exe;
  JudgeContext judge;
  judge.timeout_s = in.lab.timeout_s;
  judge.gpu_missing = built.gpu_missing;
  const Check ran = run_and_judge(in, runs, c, exe, w, emulated, judge, "", /*trusted=*/true);
  if (ran.status != Status::kPass && ran.status != Status::kEmuPass) return known;
  profile.put(key, {ran.data.value("assertions", -1L), ran.seconds / (emulated ? 2.0 : 1.0), in.seed});
  return profile.find(key);
}

bool passed(const Check& check) { return check.status == Status::kPass || check.status == Status::kEmuPass; }

/// A passed case, judged again by its values outside the process (outputs.hpp): @p submission's
/// against @p reference's (the same check when the reference is what is graded). A value that
/// does not hold fails the case, whatever the process's own checks said.
void judge_outside(Check& check, const Check& reference, bool emulated) {
  const nlohmann::json mine = check.data.value("outputs", nlohmann::json::array()), theirs = reference.data.value("outputs", nlohmann::json::array());
  const OutsideVerdict v = judge_outputs(mine, theirs);
  // The values are judged: their files go (a GPU case's can be large); the records keep their hashes.
  for (const nlohmann::json* outputs : {&mine, &theirs}) {
    for (const auto& o : *outputs) {
      if (!o.is_object() || !o.contains("blobs") || !o["blobs"].is_array()) continue;
      for (const auto& b : o["blobs"]) {
        std::error_code ec;
        if (b.is_object() && b.contains("file") && b["file"].is_string()) fs::remove(b["file"].get<std::string>(), ec);
      }
    }
  }
  check.data["outside"] = {{"compared", v.compared}};
  if (v.problems.empty()) return;
  check.status = emulated ? Status::kEmuFail : Status::kFail;
  check.details = v.problems;
  check.hints = {"each check's values leave the test process and the grader compares them again with the reference's run on the same "
                 "inputs (README.md, \"The grader\"): the values sent must be the ones computed and must hold"};
}

/// One case at one width: the learner's run, judged against the reference's.
Check graded_case(const GradeInputs& in, Built& built, LearnerRuns& runs, const CaseInfo& c, int w, bool emulated) {
  JudgeContext judge;
  judge.gpu_missing = built.gpu_missing;
  const std::string exe = emulated ? in.lab.build.variant(built.emulator)->exe : in.build().exe;
  ReferenceProfile& profile = emulated ? built.emu_profile : built.profile;
  const std::string key = ReferenceProfile::key(c.name, w, emulated);
  if (in.graded_is_reference()) {
    // The reference graded: its values are held to what it compared them with, outside it.
    judge.timeout_s = in.case_timeout();
    Check check = run_and_judge(in, runs, c, exe, w, emulated, judge, "all");
    if (passed(check)) {
      profile.put(key, {check.data.value("assertions", -1L), check.seconds / (emulated ? 2.0 : 1.0), in.seed});
      judge_outside(check, check, emulated);
    }
    return check;
  }
  const ReferenceRun* reference = reference_run(in, built, runs, c, w, emulated, false);
  judge.timeout_s = in.options.timeout_s > 0 ? in.options.timeout_s : in.limit_for(reference);
  judge.reference_assertions = reference != nullptr ? reference->assertions : -1;
  Check check = run_and_judge(in, runs, c, exe, w, emulated, judge, "got");
  if (check.data.value("fewer_assertions", false) && reference->seed != in.seed) {
    // The cached count came from another seed: count the reference's checks on this one.
    reference = reference_run(in, built, runs, c, w, emulated, true);
    judge.reference_assertions = reference != nullptr ? reference->assertions : -1;
    check = run_and_judge(in, runs, c, exe, w, emulated, judge, "got");
  }
  if (check.data.value("hung", false) && !emulated && reference != nullptr && in.options.timeout_s <= 0) {
    check.details.front() += " (the limit: " + describe_limit(reference->seconds, kLimitFloorS, in.case_timeout()) + ")";
  }
  if (passed(check)) {
    // The trusted run: the reference on the same case, seed and ranks, sending what it compared
    // with and the bounds; it also brings the profile's figures up to this seed.
    JudgeContext trusted;
    trusted.gpu_missing = built.gpu_missing;
    trusted.timeout_s = in.case_timeout();
    const std::string reference_exe = in.lab.build.variant(emulated ? "emu_ref" : "ref")->exe;
    Check ran = run_and_judge(in, runs, c, reference_exe, w, emulated, trusted, "all", /*trusted=*/true);
    if (!passed(ran)) ran = run_and_judge(in, runs, c, reference_exe, w, emulated, trusted, "all", /*trusted=*/true);  // once more: a loaded machine
    if (passed(ran)) {
      profile.put(key, {ran.data.value("assertions", -1L), ran.seconds / (emulated ? 2.0 : 1.0), in.seed});
      judge_outside(check, ran, emulated);
    } else {
      // Fail closed: a pass that could not be judged outside the process is not a pass (its own
      // processes may have made the trusted run fail, e.g. by filling the disk); nor is it blamed.
      check.status = emulated ? Status::kEmuNotRun : Status::kNotRun;
      check.details = {"could not be judged outside the process: the reference's own run on this seed did not pass, twice (" +
                       ran.data.value("process", std::string("?")) + (ran.details.empty() ? "" : ": " + ran.details.front()) +
                       "); grade again, and if it persists run ./gpulab grade " + in.lab.number + " --solutions"};
      check.data["outside"] = {{"compared", 0}, {"not_judged", check.details.front()}};
    }
  }
  return check;
}

/// A [gpu] case where there is no GPU: on the emulator, or why it could not be.
Check emulated(const GradeInputs& in, Built& built, LearnerRuns& runs, const CaseInfo& c) {
  if (!built.emulator.empty()) return graded_case(in, built, runs, c, 0, true);
  Check check = Check::failure(c.name, Kind::kCorrectness, "needs a GPU: " + built.gpu_missing);
  check.where = Where::kGpu;
  check.status = Status::kEmuNotRun;
  if (!built.emulator_problem.empty()) check.details.push_back(built.emulator_problem);
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

double GradeInputs::limit_for(const ReferenceRun* reference) const {
  return reference == nullptr ? case_timeout() : derived_limit(reference->seconds, kLimitFloorS, case_timeout());
}

std::optional<Correctness> stage_correctness(const GradeInputs& in, Built& built, LearnerRuns& runs, Scorecard& card) {
  std::optional<std::vector<CaseInfo>> cases = list_cases(in, card);
  if (!cases) return std::nullopt;
  Correctness correct{std::move(*cases), {}};
  // The emulator's build only when a chosen case runs on it (a --case on a [cpu] case needs none).
  const bool emulates = !built.gpu_missing.empty() && in.lab.build.emulated();
  if (emulates && std::any_of(correct.cases.begin(), correct.cases.end(), [](const CaseInfo& c) { return emulable(c); })) {
    prepare_emulator(in, built, card);
    runs.rehash_artefacts();  // the emulator's builds were brought up to date just now, by the grader
  }
  const std::vector<int> widths = in.widths().empty() ? std::vector<int>{0} : in.widths();
  for (const CaseInfo& c : correct.cases) {
    if (c.perf()) continue;
    if (emulates && emulable(c)) {
      Check check = emulated(in, built, runs, c);
      mark_stretch(c, check);
      if (!in.lab.parts.empty()) check.data["part"] = part_of(in.lab, c);
      card.add(check);
      if (!runs.untampered(card)) return std::nullopt;
      continue;
    }
    // A case whose tests compute the same on every rank at every width ([any-width]: pure
    // functions such as a partition or a schedule's lists) runs at the first width only.
    const std::vector<int> case_widths = c.has_tag("any-width") ? std::vector<int>{widths.front()} : widths;
    for (int w : case_widths) {
      if (correct.hung_widths.count(w)) {
        card.add(not_run_after_hang(c, w));
        continue;
      }
      Check check = graded_case(in, built, runs, c, w, false);
      if (w > 0 && check.data.value("hung", false)) correct.hung_widths.insert(w);
      if (w > 0) check.name += " (W=" + std::to_string(w) + ")";
      mark_stretch(c, check);
      if (!in.lab.parts.empty()) check.data["part"] = part_of(in.lab, c);
      card.add(check);
      if (!runs.untampered(card)) return std::nullopt;
    }
  }
  built.profile.save();
  built.emu_profile.save();
  return correct;
}

}  // namespace gpulab::cli
