/// @file stage_perf.cpp
/// @brief The performance stage: [perf] cases only measure and record; here learner and
/// reference alternate round by round until the verdict rules (verdict.hpp) decide.
#include <chrono>
#include <cmath>
#include <cstdio>

#include "gpulab/stats.hpp"
#include "grade/grade_stages.hpp"
#include "run/cluster.hpp"

namespace gpulab::cli {
namespace {

std::string fixed(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

/// A measured figure with three significant digits (3970, 39.7, 3.97, 0.397).
std::string figure(double v) {
  const double a = std::fabs(v);
  return fixed(v, a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3);
}

/// "yours = 61 % of this GPU's measured fp32 FMA peak (…)", from the peaks a record carries.
std::string peak_line(const nlohmann::json& data, double value, const std::string& who) {
  const std::string unit = data.value("unit", "");
  const bool flops = unit.find("FLOP/s") != std::string::npos;
  const double peak = flops ? data.value("peak_gflops", 0.0) : unit.find("B/s") != std::string::npos ? data.value("peak_gbs", 0.0) : 0.0;
  // The peaks are in giga; the figure in its own unit's prefix (lab 04 states TFLOP/s).
  const double giga = unit.rfind("T", 0) == 0 ? 1e3 : unit.rfind("M", 0) == 0 ? 1e-3 : unit.rfind("K", 0) == 0 ? 1e-6 : 1.0;
  if (peak <= 0.0 || value <= 0.0) return "";
  char b[240];
  std::snprintf(b, sizeof b, "%s = %.0f %% of this GPU's measured %s (%.0f %s, measured %s)", who.c_str(), 100.0 * value * giga / peak,
                flops ? "fp32 FMA peak" : "copy bandwidth", peak, flops ? "GFLOP/s" : "GB/s",
                data.value("peaks_measured_at", std::string("?")).c_str());
  return b;
}

/// The GPU's attributes and the compiler's report describe the same binary: say so when they
/// disagree (e.g. the driver compiled PTX for a newer GPU than the build targeted).
void register_mismatches(const nlohmann::json& kernels, const std::vector<KernelResources>& ptxas, std::vector<std::string>& lines) {
  for (const auto& k : kernels) {
    if (!k.is_object()) continue;
    for (const KernelResources& r : ptxas) {
      if (r.name != k.value("name", std::string()) || r.registers == k.value("registers", -1)) continue;
      lines.push_back("note: the GPU reports " + std::to_string(k.value("registers", -1)) + " registers for " + r.name + ", ptxas " +
                      std::to_string(r.registers) + " for " + r.arch + ": the GPU runs code compiled for another architecture (rebuild for this GPU)");
    }
  }
}

Check not_run_check(const std::string& name, const std::string& why) {
  Check c = Check::failure(name, Kind::kPerformance, "needs a GPU" + (why.empty() ? std::string() : ": " + why));
  c.where = Where::kGpu;
  c.status = Status::kNotRun;
  return c;
}

/// Across a cluster of shaped links: the graded figure against the link's rate (judge_link).
void judge_against_link(const GradeInputs& in, const PerfSpec& spec, double value, double reference, Check& check) {
  if (in.options.nodes <= 0 || spec.min_fraction_of_link <= 0.0) return;
  const ClusterPlan plan = saved_cluster(in.paths);
  const LinkJudgement j = judge_link(value, check.data.value("unit", ""), plan.link_rate, in.options.nodes, in.perf_width(), spec,
                                     in.graded_is_reference() ? "reference" : "yours", in.graded_is_reference() ? 0.0 : reference);
  if (!j.text.empty()) check.details.insert(check.details.begin() + std::min<std::size_t>(check.details.size(), 1), j.text);  // after the figure
  if (!j.applies) return;
  check.data["link_rate_gbs"] = j.rate_gbs;
  check.data["fraction_of_link"] = j.fraction;
  check.data["link_judged"] = j.judged;
  if (!j.pass) {
    check.status = Status::kFail;
    check.hints.push_back("below the link's rate: " + spec.hint);
  }
}

/// A performance run's limit: the reference's runs measure for tens of seconds at most.
constexpr double kPerfLimitS = 600.0;

/// One performance case: rounds until decided; the check it makes.
Check measure_case(const GradeInputs& in, const Built& built, const Diagnosis& diagnosis, LearnerRuns& runs, const CaseInfo& c) {
  Check check;
  check.name = c.name + (in.perf_width() > 0 ? " (W=" + std::to_string(in.perf_width()) + ")" : "");
  check.kind = Kind::kPerformance;
  check.where = where_from_string(c.where);
  VerdictRules rules;
  rules.min_rounds = std::max(1, in.options.rounds);
  rules.max_rounds = std::max(rules.min_rounds, in.options.max_rounds);
  rules.time_cap_s = in.options.perf_time_cap_s;
  PerfSamples learner, reference;
  std::string metric;
  const PerfSpec* spec = nullptr;
  Verdict verdict;
  const auto start = std::chrono::steady_clock::now();
  double reference_s = 0.0;
  for (bool decided = false; !decided;) {
    // The reference first: its time bounds the learner's run (a hang costs seconds, not minutes).
    for (const bool mine : {false, true}) {
      if (!mine && in.graded_is_reference()) continue;
      const double limit = mine && !in.graded_is_reference() ? derived_limit(reference_s, 10.0, kPerfLimitS) : kPerfLimitS;
      RunSpec run{mine ? in.build().exe : in.reference().exe, c.name, in.perf_width(), limit, in.seed, in.log_dir, runs.next_stem(), {},
                  &runs.confinement(), ""};
      const CaseRun r = run_case(run);
      check.seconds += r.process.seconds;
      if (!mine) reference_s = r.process.seconds;
      JudgeContext judge;
      judge.timeout_s = limit;
      judge.gpu_missing = built.gpu_missing;
      const Check why = judge_case(c, r, in.lab, judge);
      if (why.status == Status::kNotRun) return not_run_check(check.name, r.skip_reason.empty() ? built.gpu_missing : r.skip_reason);
      if (why.status != Status::kPass) {
        check.details.push_back(std::string(mine && !in.graded_is_reference() ? "learner" : "reference") + " run " + r.process.describe() +
                                (why.details.empty() ? std::string() : ": " + why.details.front()));
        // Every rank's problem, not only the first: a rank that ended early is usually the cause
        // of the others' missing reports (the first CI run with the new limits lost this).
        for (std::size_t k = 1; k < why.details.size() && k < 6; ++k) check.details.push_back(why.details[k]);
        check.details.push_back("its logs: " + (in.log_dir / (run.stem + ".log")).string() +
                                (run.ranks > 0 ? " and " + (in.log_dir / (run.stem + "-ranks")).string() + "/" : std::string()));
        check.hints = why.hints;
        return check;
      }
      metric = add_perf_records(r.records, mine ? "learner" : "reference", mine ? learner : reference, check.data);
    }
    if (learner.fraction.empty() || metric.empty()) {
      check.details.push_back("no measurement recorded");
      return check;
    }
    const auto it = in.lab.performance.find(metric);
    if (it == in.lab.performance.end()) {
      check.details.push_back("tests/" + in.lab.slug + "/lab.json has no \"performance\" entry for metric \"" + metric + "\"");
      return check;
    }
    spec = &it->second;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    verdict = in.graded_is_reference() ? decide(learner.fraction, {}, spec->reference_min_fraction_of_baseline, elapsed, rules)
                                        : decide(learner.fraction, reference.fraction, spec->min_fraction_of_reference, elapsed, rules);
    decided = verdict.decided;
    // A baseline that disagrees between the two sides is a spell of load, not a verdict: measure
    // again while rounds are left (one round of a plant's fast grade met one in CI twice).
    if (decided && !in.graded_is_reference() && measure_again_for_baseline(learner, reference, rules, elapsed)) decided = false;
  }
  check.data["metric"] = metric;
  describe_performance(check, learner, reference, in.graded_is_reference(), *spec, verdict, rules, diagnosis.ptxas);
  judge_against_link(in, *spec, median(learner.value), reference.value.empty() ? 0.0 : median(reference.value), check);
  if (!in.graded_is_reference()) {
    if (const std::string problem = baseline_mismatch(learner, reference); !problem.empty()) {
      check.status = Status::kFail;
      check.details.insert(check.details.begin(), problem);
    }
  }
  return check;
}

}  // namespace

std::string add_perf_records(const std::vector<nlohmann::json>& records, const std::string& side, PerfSamples& samples,
                             nlohmann::json& data) {
  std::string metric;
  for (const auto& rec : records) {
    // One figure per run: in a distributed case every rank records the same one.
    if (rec.value("kind", "") != "performance" || rec.value("rank", 0) != 0) continue;
    metric = rec.value("metric", "");
    samples.fraction.push_back(rec.value("fraction_of_baseline", 0.0));
    samples.value.push_back(rec.value("value", 0.0));
    samples.baseline.push_back(rec.value("baseline", 0.0));
    for (const char* key : {"note", "timing", "unit", "baseline_name", "flops_per_byte", "peak_gflops", "peak_gbs", "peaks_measured_at"}) {
      if (rec.contains(key)) data[key] = rec[key];
    }
    if (!rec.value("slowdowns", "").empty()) {
      for (const char* key : {"slowdowns", "sm_clock_mhz", "temperature_c"}) data[key] = rec.value(key, nlohmann::json());
    }
    if (rec.contains("rungs")) data[side + "_rungs"] = rec["rungs"];
    if (rec.contains("kernels")) data[side + "_kernels"] = rec["kernels"];
    if (rec.contains("timeline")) data[side + "_timeline"] = rec["timeline"];
  }
  return metric;
}

void describe_performance(Check& check, const PerfSamples& learner, const PerfSamples& reference, bool graded_is_reference,
                          const PerfSpec& spec, const Verdict& verdict, const VerdictRules& rules,
                          const std::vector<KernelResources>& ptxas) {
  nlohmann::json& d = check.data;
  const std::string unit = d.value("unit", ""), base_name = d.value("baseline_name", "baseline");
  const PerfSamples& ref = graded_is_reference ? learner : reference;
  const double mine = median(learner.fraction), theirs = median(ref.fraction), threshold =
      graded_is_reference ? spec.reference_min_fraction_of_baseline : spec.min_fraction_of_reference;
  if (!spec.target_basis.empty()) d["target_basis"] = spec.target_basis;
  d["target_measured"] = spec.target_measured;
  d.update({{"threshold", threshold}, {"variant", graded_is_reference ? "ref" : "learner"}, {"learner_fraction", mine},
            {"reference_fraction", theirs}, {"learner_value", median(learner.value)}, {"reference_value", median(ref.value)},
            {"baseline_value", median(learner.baseline)}, {"rounds", learner.fraction.size()}});
  const std::string base = base_name + " " + figure(median(learner.baseline)) + " " + unit;
  if (graded_is_reference) {
    check.details.push_back("reference " + figure(median(learner.value)) + " " + unit + " = " + fixed(100 * mine, 1) + " % of " + base +
                            (threshold > 0 ? "; target ≥ " + fixed(100 * threshold, 0) + " %" : " (no absolute target: recorded in BENCHMARKS.md)") +
                            (spec.target_measured ? "" : " — target (unmeasured): " + spec.target_basis));
  } else {
    const double rel = theirs > 0 ? mine / theirs : 0.0;
    // Each run is judged against the baseline measured beside it: the percentages are medians of
    // those per-run ratios, which can differ from the ratio of the medians printed beside them.
    const std::size_t runs = learner.value.size();
    check.details.push_back("yours " + figure(median(learner.value)) + " " + unit + " = " + fixed(100 * mine, 1) + " % of " + base + " (medians over " +
                            std::to_string(runs) + (runs == 1 ? " run" : " runs") + "; the % is the median of each run's own ratio)");
    check.details.push_back("reference " + figure(median(reference.value)) + " " + unit + " = " + fixed(100 * theirs, 1) + " % of its baseline;  yours = " +
                            fixed(100 * rel, 1) + " % of it (" + fixed(100 * mine, 1) + " / " + fixed(100 * theirs, 1) + "), need ≥ " +
                            fixed(100 * threshold, 0) + " %");
    d["fraction_of_reference"] = rel;
  }
  const std::string who = graded_is_reference ? "reference" : "yours";
  if (const std::string peak = peak_line(d, median(learner.value), who); !peak.empty()) check.details.push_back(peak);
  if (d.contains("note")) check.details.push_back(d["note"].get<std::string>() + " (last run)");
  if (d.contains("learner_kernels")) {
    describe_launched_kernels(d["learner_kernels"], graded_is_reference ? nlohmann::json() : d.value("reference_kernels", nlohmann::json()),
                              who, check.details, check.hints);
    register_mismatches(d["learner_kernels"], ptxas, check.details);
  }
  if (d.contains("slowdowns")) {
    check.details.push_back("warning: the GPU was slowing down (" + d["slowdowns"].get<std::string>() + ", SM clock " +
                            d.value("sm_clock_mhz", nlohmann::json(0)).dump() + " MHz, " + d.value("temperature_c", nlohmann::json(0)).dump() +
                            " °C): the figures may be low; let it cool and grade again");
  }
  check.details.push_back("medians of alternating runs (" + describe_rules(rules) + ")" +
                          (d.contains("timing") ? "; each run: " + d["timing"].get<std::string>() : std::string()) + ": " + verdict.note);
  d["verdict_note"] = verdict.note;
  check.status = verdict.pass ? Status::kPass : Status::kFail;
  if (!verdict.pass && !spec.hint.empty()) check.hints.push_back(spec.hint);
}

bool measure_again_for_baseline(const PerfSamples& learner, const PerfSamples& reference, const VerdictRules& rules, double elapsed_s) {
  return !baseline_mismatch(learner, reference).empty() && static_cast<int>(learner.fraction.size()) < rules.max_rounds && elapsed_s < rules.time_cap_s;
}

std::string baseline_mismatch(const PerfSamples& learner, const PerfSamples& reference) {
  if (learner.baseline.empty() || reference.baseline.empty()) return "";
  const double mine = median(learner.baseline), theirs = median(reference.baseline);
  if (theirs <= 0.0 || mine >= kBaselineAgreement * theirs) return "";
  char text[300];
  std::snprintf(text, sizeof text,
                "the baseline measured beside your code (%.3g) is %.0f %% of the one measured beside the reference's (%.3g): something in "
                "your process slowed the library down, so the comparison is not trusted",
                mine, 100.0 * mine / theirs, theirs);
  return text;
}

LinkJudgement judge_link(double value, const std::string& unit, const std::string& link_rate, int nodes, int ranks, const PerfSpec& spec,
                         const std::string& who, double reference) {
  LinkJudgement j;
  if (spec.min_fraction_of_link <= 0.0 || unit.rfind("GB/s", 0) != 0 || nodes < 2) return j;
  j.rate_gbs = link_rate_bytes_per_s(link_rate) / 1e9;
  if (j.rate_gbs <= 0.0) {
    j.text = "links unshaped: no link rate to compare with (cluster up --link-rate 1gbit sets one)";
    return j;
  }
  j.applies = true;
  j.fraction = value / j.rate_gbs;
  const double need = spec.min_fraction_of_link;
  char target[240];
  if (ranks != nodes) {
    std::snprintf(target, sizeof target, "reported, not judged: %d ranks on %d nodes (the target, ≥ %.0f %%, holds for one rank per node)", ranks, nodes,
                  100.0 * need);
  } else if (nodes > spec.link_gate_max_nodes) {
    std::snprintf(target, sizeof target,
                  "reported, not judged (≥ %.0f %% is required up to %d nodes; beyond, the nodes share this machine's cores, which can become the limit)",
                  100.0 * need, spec.link_gate_max_nodes);
  } else if (reference > 0.0 && reference / j.rate_gbs < need) {
    std::snprintf(target, sizeof target, "reported, not judged: the reference reached only %.1f %% of the link in the same run (this machine is the limit)",
                  100.0 * reference / j.rate_gbs);
  } else {
    j.judged = true;
    std::snprintf(target, sizeof target, "target ≥ %.0f %%", 100.0 * need);
  }
  j.pass = !j.judged || j.fraction >= need;
  char text[480];
  std::snprintf(text, sizeof text, "%s %s %s = %.1f %% of the %s link (%.3f GB/s) across %d nodes; %s", who.c_str(), figure(value).c_str(),
                unit.c_str(), 100.0 * j.fraction, link_rate.c_str(), j.rate_gbs, nodes, target);
  j.text = text;
  return j;
}

bool stage_performance(const GradeInputs& in, const Built& built, const Diagnosis& diagnosis, const Correctness& correct, LearnerRuns& runs,
                       Scorecard& card) {
  for (const CaseInfo& c : correct.cases) {
    if (!c.perf()) continue;
    if (c.where == "gpu" && !built.gpu_missing.empty()) {
      Check skipped = not_run_check(c.name, built.gpu_missing);
      if (!in.lab.parts.empty()) skipped.data["part"] = part_of(in.lab, c);
      card.add(skipped);
      continue;
    }
    if (correct.hung_widths.count(in.perf_width())) {
      Check skipped = not_run_check(c.name + " (W=" + std::to_string(in.perf_width()) + ")", "");
      skipped.details = {"not run: an earlier case hung at W = " + std::to_string(in.perf_width())};
      if (!in.lab.parts.empty()) skipped.data["part"] = part_of(in.lab, c);
      card.add(skipped);
      continue;
    }
    Check check = measure_case(in, built, diagnosis, runs, c);
    if (!in.graded_is_reference()) mark_stretch(c, check);
    if (!in.lab.parts.empty()) check.data["part"] = part_of(in.lab, c);
    card.add(check);
    if (!runs.untampered(card)) return false;
  }
  return true;
}

}  // namespace gpulab::cli
