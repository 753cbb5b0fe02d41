/// @file grade_stages.hpp
/// @brief The stages of `gpulab grade` (grade.hpp): each a function from what it needs (the
/// inputs, what earlier stages produced) to what it produces, adding its checks to the scorecard;
/// the pipeline (grade.cpp) wires them. What they share that changes is explicit: the learner's
/// processes (LearnerRuns) and the reference's recorded runs (Built's profiles).
/// The decisions inside each stage are pure functions declared here too, unit-tested on
/// recorded inputs (tests/cli/test_stages.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include "base/files.hpp"
#include "base/lab_config.hpp"
#include "grade/cases.hpp"
#include "grade/diagnose.hpp"
#include "grade/grade.hpp"
#include "grade/integrity.hpp"
#include "grade/reference_profile.hpp"
#include "grade/verdict.hpp"

namespace gpulab::cli {

/// Which sources are graded.
enum class Sources { kLab, kSubmission, kReference };

/// What every stage reads and none changes: the lab, the options, the sources graded and where
/// they are compiled, the logs, the seed. Fixed by the pipeline (grade.cpp) before the first stage.
struct GradeInputs {
  GradeInputs(const Paths& p, const GradeOptions& o, LabConfig l) : paths(p), options(o), lab(std::move(l)) {}
  const Paths& paths;
  const GradeOptions& options;
  LabConfig lab;
  Sources sources = Sources::kLab;
  fs::path source_dir;    ///< the folder graded, as the learner named it
  fs::path compiled_dir;  ///< where it is compiled from (the snapshot, for a submission)
  fs::path log_dir;       ///< build/grade/NN
  std::uint64_t seed = 0;
  std::string variant;    ///< "lab", "sub" or "ref" (BuildInfo::variants)

  const Variant& build() const { return *lab.build.variant(variant); }
  const Variant& reference() const { return *lab.build.variant("ref"); }
  bool graded_is_reference() const { return sources == Sources::kReference; }
  double case_timeout() const { return options.timeout_s > 0 ? options.timeout_s : lab.timeout_s; }
  /// The W each correctness case runs at (empty: not distributed) and the one of [perf] cases.
  std::vector<int> widths() const;
  int perf_width() const;
  /// The limit for a case the reference ran in @p reference_s (or the lab's limit when unknown).
  double limit_for(const ReferenceRun* reference) const;
};

/// The learner's processes, which every stage that runs one shares: their logs numbered in
/// order, the grader's files they may only read, and a check of those files after each. Armed by
/// the build stage once the grader's build is complete, before any learner process runs.
class LearnerRuns {
 public:
  /// Guards the grader's build, tests/ and solutions/ of the lab and the learner's progress.
  void arm(const GradeInputs& in);
  /// After a learner process: false (and a failed integrity check) when it changed the grader's files.
  bool untampered(Scorecard& card);
  /// After the grader rebuilt one of its own artefacts (the emulator's build), before a learner process ran.
  void rehash_artefacts() { guard_.rehash_artefacts(); }
  /// The next log's stem ("case-7").
  std::string next_stem() { return "case-" + std::to_string(next_log_++); }
  /// How the learner's processes run: under gpulab-launch, in a sandbox where the grader's files
  /// (tests/, solutions/, tools/, common/, the whole build but the program under test) are hidden
  /// and the rest is read-only.
  const Confinement& confinement() const { return confine_; }

 private:
  TreeGuard guard_;
  Confinement confine_;
  int next_log_ = 0;
};

/// What the build stage found: whether there is a GPU, the emulator's build where there is none,
/// and the reference's recorded runs (which the correctness stage extends as it runs it).
struct Built {
  std::string gpu_missing;       ///< "" when the reference's device probe found a GPU
  std::string emulator;          ///< without a GPU: the emulated variant ("emu_lab"), "" if none
  std::string emulator_problem;  ///< why the emulated build could not be made
  ReferenceProfile profile;      ///< the reference's assertions and times per case (native)
  ReferenceProfile emu_profile;  ///< the same on the emulator
};

/// What the diagnosis stage found: the learner's kernels' resources (shown beside speed figures).
struct Diagnosis {
  std::vector<KernelResources> ptxas;
};

/// What the correctness stage found: the cases graded (as the reference lists them, after --part
/// and --case) and the widths W at which a case hung (later cases there are not run).
struct Correctness {
  std::vector<CaseInfo> cases;
  std::set<int> hung_widths;
};

/// The trees grading must leave as they are, hashed before any learner code runs.
struct TreesBefore {
  TreeHashes labs, solutions, submission;
};

// The stages, in the pipeline's order (grade.cpp). Each takes what it needs, adds its checks to
// the scorecard and returns what it produced; false or no value: the grade stops there.
bool stage_sources(const GradeInputs& in, Scorecard& card);
std::optional<Built> stage_build(const GradeInputs& in, LearnerRuns& runs, Scorecard& card);
Diagnosis stage_diagnosis(const GradeInputs& in, Scorecard& card);
std::optional<Correctness> stage_correctness(const GradeInputs& in, Built& built, LearnerRuns& runs, Scorecard& card);
bool stage_sanitizer(const GradeInputs& in, const Built& built, const Correctness& correct, LearnerRuns& runs, Scorecard& card);
bool stage_profile(const GradeInputs& in, const Built& built, LearnerRuns& runs, Scorecard& card);
bool stage_performance(const GradeInputs& in, const Built& built, const Diagnosis& diagnosis, const Correctness& correct, LearnerRuns& runs,
                       Scorecard& card);
void stage_integrity(const GradeInputs& in, const TreesBefore& before, LearnerRuns& runs, Scorecard& card);

/// Without a GPU, the [gpu] cases run on the CPU emulator (emulation.hpp), measured against the
/// reference's emulated runs: builds the emulated learner and reference, judges the learner's
/// emulated objects by the same symbol rules, and records in @p built what the cases run on (or
/// why they cannot). The correctness stage calls it once it knows a chosen case needs it.
void prepare_emulator(const GradeInputs& in, Built& built, Scorecard& card);

/// The learner's objects against the symbol rules (symbols.hpp), measured against @p reference;
/// adds the check "your code stays in labNN::".
void check_symbols(const GradeInputs& in, Scorecard& card, const Variant& learner, const Variant& reference);
/// The symbol rules (symbols.hpp) broken by @p learner's objects, judged against @p reference's
/// build, one scorecard line each ("calls exit: ..."); empty when it keeps them. @p source_dir
/// holds the objects' sources (their .cu files tell nvcc's stubs from the learner's calls).
std::set<std::string> symbol_problems(const std::string& lab_number, const Variant& learner, const Variant& reference, const fs::path& source_dir);

// --- the decisions, pure -------------------------------------------------------------------

/// Forbidden library code in `nm -C` output: "a call to cublasSgemm_v2", "code from thrust:: (...)".
std::vector<std::string> forbidden_in_nm(const std::string& nm_output, const ForbiddenSymbols& rules);

/// compute-sanitizer's own report lines (its "=========" lines, the first few) for one case.
std::vector<std::string> sanitizer_findings(const std::string& output, int keep = 6);
/// The hint for a finding of @p tool (memcheck, racecheck, synccheck, initcheck).
std::string sanitizer_hint(const std::string& tool);
/// Whether --sanitize runs case @p c: a [gpu] case that neither times anything ([perf], [timing])
/// nor is [big]. The H200's first --sanitize failed lab 02's two timed comparisons under memcheck.
bool sanitizable(const CaseInfo& c);

/// A figure measured across a cluster against the link's rate (PerfSpec::min_fraction_of_link).
struct LinkJudgement {
  bool applies = false;  ///< a GB/s figure, a shaped link and a spec that asks for it
  bool judged = false;   ///< nodes <= spec.link_gate_max_nodes; beyond, reported only
  bool pass = true;
  double rate_gbs = 0.0, fraction = 0.0;
  std::string text;      ///< the scorecard's line
};
/// @p who ("yours", "reference") measured @p value in @p unit with @p ranks ranks across @p nodes
/// nodes whose links run at @p link_rate (tc's form, "" when unshaped). Judged only with one rank
/// per node (ranks == nodes >= 2: otherwise a link carries several flows or none) and, for a
/// learner, only where the reference measured in the same run (@p reference > 0) reached the
/// target itself — else this machine, not the code, is the limit, and the figure is reported.
LinkJudgement judge_link(double value, const std::string& unit, const std::string& link_rate, int nodes, int ranks, const PerfSpec& spec,
                         const std::string& who, double reference = 0.0);

/// One side's figures from a performance case, round by round.
struct PerfSamples {
  std::vector<double> fraction, value, baseline;  ///< per round: value / baseline, value, baseline
};
/// The performance records of one run (rank 0's) added to @p samples; the last record's extra
/// fields (unit, note, kernels, peaks, GPU state) merged into @p data under @p side.
std::string add_perf_records(const std::vector<nlohmann::json>& records, const std::string& side, PerfSamples& samples,
                             nlohmann::json& data);
/// The baselines of the two sides must agree: the learner's process measures its own (the
/// library, memcpy) and could slow it. Below this fraction of the reference side's, it is not trusted.
inline constexpr double kBaselineAgreement = 0.67;
/// "" when the learner side's median baseline is at least kBaselineAgreement of the reference
/// side's, else why the comparison is not trusted.
std::string baseline_mismatch(const PerfSamples& learner, const PerfSamples& reference);
/// Whether a decided learner-against-reference comparison is measured again anyway: its
/// baselines disagree (a spell of load, not a verdict) while rounds and time are left. With none
/// left the decision stands, and the mismatch fails the check ("not trusted").
bool measure_again_for_baseline(const PerfSamples& learner, const PerfSamples& reference, const VerdictRules& rules, double elapsed_s);
/// The check's lines from the samples and the verdict (yours, the reference's, the baseline's,
/// the threshold, the peak fraction, the rules the verdict followed).
void describe_performance(Check& check, const PerfSamples& learner, const PerfSamples& reference, bool graded_is_reference,
                          const PerfSpec& spec, const Verdict& verdict, const VerdictRules& rules,
                          const std::vector<KernelResources>& ptxas);

}  // namespace gpulab::cli
