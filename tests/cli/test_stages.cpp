/// @file test_stages.cpp
/// @brief The grader's decisions on recorded inputs: forbidden symbols from nm output, the
/// sanitizer's report, the verdict on a case from its exit and records, a performance check from
/// recorded records, the emulator's statuses, the scorecard's counts, the plants' verdicts.
#include <catch2/catch.hpp>

#include <sstream>

#include "author/plants.hpp"
#include "author/selftest_table.hpp"
#include "grade/emulation.hpp"
#include "grade/grade_stages.hpp"

using namespace gpulab::cli;
using nlohmann::json;

namespace {

LabConfig a_lab() {
  LabConfig lab = parse_lab_json(R"({"title": "X", "sources": ["a.cu"], "hints": {"timeout": "a loop that never ends", "crash": "it crashed"}})", "lab.json");
  lab.number = "05";
  lab.slug = "05-x";
  return lab;
}

/// A run that exited with @p exit_code, its records, and (@p complete) the runner's completion
/// record for @p case_name with this run's token.
CaseRun a_run(int exit_code, std::vector<json> records = {}, std::string output = "", bool complete = true, const std::string& case_name = "adds") {
  CaseRun r;
  r.token = "t0k3n";
  r.process.exit_code = exit_code;
  r.process.output = std::move(output);
  r.records = std::move(records);
  if (complete) {
    r.records.push_back({{"kind", "completion"}, {"case", case_name}, {"assertions_passed", 12}, {"assertions_failed", exit_code == 1 ? 1 : 0},
                         {"token", "t0k3n"}});
  }
  return r;
}

JudgeContext within(double seconds, const std::string& gpu_missing = "no NVIDIA driver", long reference_assertions = -1) {
  JudgeContext j;
  j.timeout_s = seconds;
  j.gpu_missing = gpu_missing;
  j.reference_assertions = reference_assertions;
  return j;
}

const CaseInfo kCpuCase{"cpu", "adds", "[cpu][05.1]", ""};
const CaseInfo kGpuCase{"gpu", "kernel adds", "[gpu][05.2]", ""};

}  // namespace

TEST_CASE("forbidden library code is found in nm output and calls by undefined symbols only", "[cpu]") {
  const std::string nm =
      "0000000000000000 T lab05::add(float const*, float*, long)\n"
      "                 U cublasSgemm_v2\n"
      "0000000000000010 T my_cublas_like_helper()\n"
      "0000000000000020 W thrust::detail::vector_base<float>::resize(unsigned long)\n"
      "                 U cudaLaunchKernel\n";
  const ForbiddenSymbols rules{{"cublas"}, {"thrust::"}, "write it yourself", {}};
  const auto hits = forbidden_in_nm(nm, rules);
  REQUIRE(hits.size() == 2);
  CHECK(hits[0] == "a call to cublasSgemm_v2");
  CHECK(hits[1].rfind("code from thrust::", 0) == 0);
  CHECK(forbidden_in_nm("                 U cudaMalloc\n", rules).empty());
}

TEST_CASE("the sanitizer's own report lines are kept and its summary dropped", "[cpu]") {
  const std::string log =
      "========= COMPUTE-SANITIZER\n"
      "========= Error: Race reported between Write access at lab05::tile_kernel(const float *, float *)+0x1c0 in a.cu:25\n"
      "=========     and Read access at lab05::tile_kernel(const float *, float *)+0x2a0 in a.cu:30 [248 hazards]\n"
      "=========\n"
      "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n"
      "========= ERROR SUMMARY: 1 error\n";
  const auto lines = sanitizer_findings(log, 6);
  CHECK(lines.size() == 4);
  CHECK(lines[1].find("Race reported between Write access") != std::string::npos);
  CHECK(std::none_of(lines.begin(), lines.end(), [](const std::string& l) { return l.find("ERROR SUMMARY") != std::string::npos; }));
  CHECK(sanitizer_hint("racecheck").find("__syncthreads") != std::string::npos);
}

TEST_CASE("the sanitizer runs the small GPU cases that time nothing", "[cpu]") {
  CHECK(sanitizable(kGpuCase));
  CHECK_FALSE(sanitizable(kCpuCase));
  // Lab 02's timed comparisons failed under memcheck on the H200 (its slowdown, not a finding).
  CHECK_FALSE(sanitizable(CaseInfo{"gpu", "padding beats the unpadded tile", "[gpu][timing][02.3]", ""}));
  CHECK_FALSE(sanitizable(CaseInfo{"gpu", "saxpy speed", "[gpu][perf]", ""}));
  CHECK_FALSE(sanitizable(CaseInfo{"gpu", "n = 2^31", "[gpu][big]", ""}));
}

TEST_CASE("a case is judged from its exit and its records", "[cpu]") {
  const LabConfig lab = a_lab();
  CHECK(judge_case(kCpuCase, a_run(0), lab, within(10)).status == Status::kPass);
  const Check failed = judge_case(kCpuCase, a_run(1, {{{"ok", false}, {"summary", "c[3] is 5, want 4"}, {"hint", "look at i"}}}), lab, within(10));
  CHECK(failed.status == Status::kFail);
  CHECK(failed.details == std::vector<std::string>{"c[3] is 5, want 4"});
  CHECK(failed.hints == std::vector<std::string>{"look at i"});
  // A check that could not run records ok: null (never a pass, never a crash of the grader).
  const Check not_run =
      judge_case(kGpuCase, a_run(0, {{{"ok", nullptr}, {"not_run", "memory"}, {"summary", "n=2^31: not run here"}}}, "", true, "kernel adds"), lab, within(10));
  CHECK(not_run.status == Status::kNotRun);
  CaseRun skipped = a_run(77, {{{"kind", "completion"}, {"case", "kernel adds"}, {"skipped", "no NVIDIA driver"}, {"token", "t0k3n"}}}, "", false);
  skipped.skip_reason = "no NVIDIA driver";
  CHECK(judge_case(kGpuCase, skipped, lab, within(10)).details.front() == "needs a GPU: no NVIDIA driver");
  CaseRun hung = a_run(-1);
  hung.process.timed_out = true;
  const Check timeout = judge_case(kCpuCase, hung, lab, within(12));
  CHECK(timeout.details.front() == "did not finish within 12 s; the process was killed");
  CHECK(timeout.hints == std::vector<std::string>{"a loop that never ends"});
  CaseRun crashed = a_run(-1);
  crashed.process.signal = 11;
  CHECK(judge_case(kCpuCase, crashed, lab, within(10)).hints == std::vector<std::string>{"it crashed"});
  const Check thrown = judge_case(kCpuCase, a_run(1, {}, "a.cpp:9: failed: unexpected exception with message:\n  'bad size'\n"), lab, within(10));
  CHECK(thrown.details.front().find("unexpected exception") != std::string::npos);
}

TEST_CASE("the ranks that reported a failure are named", "[cpu]") {
  CaseRun r = a_run(1, {{{"ok", false}, {"summary", "sum wrong"}, {"rank", 1}}, {{"ok", false}, {"summary", "sum wrong"}, {"rank", 2}}});
  CHECK(judge_case(kCpuCase, r, a_lab(), within(10)).details == std::vector<std::string>{"ranks 1,2: sum wrong"});
}

TEST_CASE("a case counts only from the runner's completion record with this run's token", "[cpu]") {
  const LabConfig lab = a_lab();
  // exit 0 and no failure record, but no completion record: an exit() inside the code under test.
  const Check exited = judge_case(kCpuCase, a_run(0, {}, "", false), lab, within(10));
  CHECK(exited.status == Status::kFail);
  CHECK(exited.details.front().rfind("ended before its checks finished (exit 0)", 0) == 0);
  // A record with another token (left over, or written by anything but this run's runner).
  CaseRun forged = a_run(0, {{{"kind", "completion"}, {"case", "adds"}, {"assertions_passed", 99}, {"assertions_failed", 0}, {"token", "guess"}}}, "", false);
  CHECK(judge_case(kCpuCase, forged, lab, within(10)).status == Status::kFail);
  // Two records for one case on one rank.
  CaseRun twice = a_run(0);
  twice.records.push_back(twice.records.back());
  CHECK(judge_case(kCpuCase, twice, lab, within(10)).details.front().find("more than one completion record") != std::string::npos);
  // A failure record fails the case even when the process exits 0.
  CHECK(judge_case(kCpuCase, a_run(0, {{{"ok", false}, {"summary", "wrong"}}}), lab, within(10)).status == Status::kFail);
  // Every rank must have finished.
  CaseRun ranks = a_run(0);
  ranks.ranks = 2;
  CHECK(judge_case(kCpuCase, ranks, lab, within(10)).details.front().find("1 rank(s) without a completion record") != std::string::npos);
}

TEST_CASE("exit 77 is no GPU only for a gpu case that the grader also found without one", "[cpu]") {
  const LabConfig lab = a_lab();
  CaseRun skip = a_run(77, {{{"kind", "completion"}, {"case", "adds"}, {"skipped", "no device"}, {"token", "t0k3n"}}}, "", false);
  const Check cpu = judge_case(kCpuCase, skip, lab, within(10));
  CHECK(cpu.status == Status::kFail);
  CHECK(cpu.details.front().find("exit 77, which is reserved for \"no GPU\": this case needs none") == 0);
  CaseRun gpu_skip = a_run(77, {{{"kind", "completion"}, {"case", "kernel adds"}, {"skipped", "no device"}, {"token", "t0k3n"}}}, "", false);
  CHECK(judge_case(kGpuCase, gpu_skip, lab, within(10, "")).details.front().find("this machine has one") != std::string::npos);
  CHECK(judge_case(kGpuCase, gpu_skip, lab, within(10)).status == Status::kNotRun);
  CHECK(judge_case(kGpuCase, a_run(77, {}, "", false), lab, within(10)).status == Status::kFail);  // 77 without the runner's record
}

TEST_CASE("a skipped case's record with exit 0 is a failure never a pass", "[cpu]") {
  const LabConfig lab = a_lab();
  // The runner's skip record, then something in the process turned exit 77 into 0 (an atexit handler, a raw exit_group).
  CaseRun skip_then_zero = a_run(0, {{{"kind", "completion"}, {"case", "kernel adds"}, {"skipped", "no device"}, {"token", "t0k3n"}}}, "", false);
  const Check judged = judge_case(kGpuCase, skip_then_zero, lab, within(10));
  CHECK(judged.status == Status::kFail);
  CHECK(judged.details.front().find("says the case was skipped (no device)") != std::string::npos);
  // One rank skipped, the other passed: still not a pass.
  CaseRun ranks = a_run(0, {{{"kind", "completion"}, {"case", "kernel adds"}, {"skipped", "no device"}, {"token", "t0k3n"}, {"rank", 0}},
                            {{"kind", "completion"}, {"case", "kernel adds"}, {"assertions_passed", 3}, {"assertions_failed", 0}, {"token", "t0k3n"}, {"rank", 1}}},
                        "", false);
  ranks.ranks = 2;
  CHECK(judge_case(kGpuCase, ranks, lab, within(10)).status == Status::kFail);
}

TEST_CASE("a pass with fewer assertions than the reference is a case that did not run to its end", "[cpu]") {
  const LabConfig lab = a_lab();
  const Check fewer = judge_case(kCpuCase, a_run(0), lab, within(10, "", 560));
  CHECK(fewer.status == Status::kFail);
  CHECK(fewer.details.front() == "ran 12 of the reference's 560 checks on this case: the case did not run to its end");
  CHECK(judge_case(kCpuCase, a_run(0), lab, within(10, "", 12)).status == Status::kPass);
}

TEST_CASE("emulated runs map to EMU statuses and the emulator's limits to N/A", "[cpu]") {
  Check c;
  c.status = Status::kPass;
  CHECK(emulated_status(c) == Status::kEmuPass);
  c.status = Status::kNotRun;
  CHECK(emulated_status(c) == Status::kEmuNotRun);
  c.status = Status::kFail;
  c.details = {"c guard bands: out-of-bounds write past the end"};
  CHECK(emulated_status(c) == Status::kEmuFail);
  c.details = {"unexpected exception with message: 'the CPU emulator does not model __ballot_sync'"};
  CHECK(emulated_status(c) == Status::kEmuNotRun);
  CHECK(emulable(kGpuCase));
  CHECK_FALSE(emulable(kCpuCase));
  CHECK_FALSE(emulable({"gpu", "speed", "[gpu][perf]", ""}));
  CHECK_FALSE(emulable({"gpu", "padding beats", "[gpu][timing]", ""}));
}

TEST_CASE("a performance check reads its figures from the records and its rules from the options", "[cpu]") {
  const std::vector<json> run = {{{"kind", "performance"}, {"metric", "vector_add"}, {"value", 3000.0}, {"baseline", 4000.0},
                                  {"fraction_of_baseline", 0.75}, {"unit", "GB/s"}, {"baseline_name", "D2D cudaMemcpy"},
                                  {"timing", "median of 11 CUDA-event samples after 200 ms of warm-up"}},
                                 {{"kind", "correctness"}, {"ok", true}}};
  PerfSamples mine, theirs;
  json data;
  CHECK(add_perf_records(run, "learner", mine, data) == "vector_add");
  add_perf_records(run, "reference", theirs, data);
  theirs.fraction.back() = 0.9;
  VerdictRules rules;
  rules.min_rounds = 1;
  const Verdict v = decide(mine.fraction, theirs.fraction, 0.6, 1.0, rules);
  Check check;
  check.data = data;
  describe_performance(check, mine, theirs, false, PerfSpec{0.6, 0.85, "coalesce"}, v, rules, {});
  CHECK(check.status == Status::kPass);
  CHECK(check.details[0] == "yours 3000 GB/s = 75.0 % of D2D cudaMemcpy 4000 GB/s (medians over 1 run; the % is the median of each run's own ratio)");
  CHECK(check.details[1].find("yours = 83.3 % of it (75.0 / 90.0), need ≥ 60 %") != std::string::npos);
  CHECK(check.details.back().find("at least 1 rounds") != std::string::npos);
  CHECK(check.details.back().find("above 2 %") != std::string::npos);
  CHECK(check.details.back().find("each run: median of 11 CUDA-event samples") != std::string::npos);
  CHECK(check.data["fraction_of_reference"].get<double>() == Approx(0.75 / 0.9));
}

TEST_CASE("across a cluster a bandwidth is judged against the link rate with one rank per node and reported otherwise", "[cpu]") {
  PerfSpec spec;
  spec.min_fraction_of_link = 0.8;
  spec.link_gate_max_nodes = 3;
  const LinkJudgement fast = judge_link(0.118, "GB/s busbw", "1gbit", 2, 2, spec, "yours", 0.118);
  CHECK(fast.applies);
  CHECK(fast.judged);
  CHECK(fast.pass);
  CHECK(fast.fraction == Approx(0.944));
  CHECK(fast.text == "yours 0.118 GB/s busbw = 94.4 % of the 1gbit link (0.125 GB/s) across 2 nodes; target ≥ 80 %");
  const LinkJudgement slow = judge_link(0.065, "GB/s busbw", "1gbit", 3, 3, spec, "yours", 0.117);
  CHECK(slow.judged);
  CHECK_FALSE(slow.pass);  // 52 % of the link while the reference reached 94 %
  const LinkJudgement edge = judge_link(0.0995, "GB/s busbw", "1gbit", 2, 2, spec, "yours", 0.117);
  CHECK_FALSE(edge.pass);
  CHECK(edge.text.find("= 79.6 %") != std::string::npos);  // never "80 %" beside a failure
  const LinkJudgement machine = judge_link(0.065, "GB/s busbw", "1gbit", 2, 2, spec, "yours", 0.09);
  CHECK_FALSE(machine.judged);  // the reference missed it too: this machine is the limit
  CHECK(machine.pass);
  CHECK(machine.text.find("the reference reached only 72.0 % of the link in the same run") != std::string::npos);
  CHECK_FALSE(judge_link(0.065, "GB/s busbw", "1gbit", 2, 2, spec, "reference").pass);  // graded alone (--solutions): judged
  const LinkJudgement beyond = judge_link(0.065, "GB/s busbw", "1gbit", 4, 4, spec, "reference");
  CHECK_FALSE(beyond.judged);
  CHECK(beyond.pass);
  CHECK(beyond.text.find("reported, not judged (≥ 80 % is required up to 3 nodes") != std::string::npos);
  const LinkJudgement shared = judge_link(0.06, "GB/s busbw", "1gbit", 2, 4, spec, "yours", 0.06);
  CHECK_FALSE(shared.judged);  // 4 ranks on 2 nodes: two flows per link
  CHECK(shared.text.find("4 ranks on 2 nodes") != std::string::npos);
  const LinkJudgement unshaped = judge_link(0.3, "GB/s busbw", "", 2, 2, spec, "yours");
  CHECK_FALSE(unshaped.applies);
  CHECK(unshaped.pass);
  CHECK(unshaped.text.find("links unshaped") != std::string::npos);
  CHECK_FALSE(judge_link(0.1, "GB/s busbw", "1gbit", 1, 1, spec, "yours").applies);   // one node: no link crossed
  CHECK_FALSE(judge_link(5.0, "steps/s", "1gbit", 2, 2, spec, "yours").applies);      // not a bandwidth
  CHECK_FALSE(judge_link(0.01, "GB/s busbw", "1gbit", 2, 2, PerfSpec{}, "yours").applies);  // no link target
}

TEST_CASE("the scorecard counts once: emulated passes are not passes and an emulated failure fails", "[cpu]") {
  std::ostringstream out;
  Scorecard card(false, &out);
  auto add = [&](Status s) {
    Check c;
    c.name = std::string("c") + to_string(s);
    c.status = s;
    card.add(c);
  };
  add(Status::kPass);
  add(Status::kInfo);
  add(Status::kEmuPass);
  add(Status::kStretch);
  CHECK(card.exit_code() == 2);
  const Counts n = card.counts();
  CHECK(n.passed == 1);
  CHECK(n.not_run == 1);
  CHECK(n.emulated_ok == 1);
  CHECK(n.stretch == 1);
  add(Status::kEmuFail);
  CHECK(card.exit_code() == 1);
  CHECK(card.to_json()["summary"]["failed"] == 1);
  CHECK(out.str().find("EMU FAIL") != std::string::npos);
  CHECK(out.str().find("\033[") == std::string::npos);  // colour only on a terminal
}

TEST_CASE("a plant's verdict names what differs", "[cpu]") {
  Plant p;
  p.expect.failed = "adds";
  p.expect.detail = "past the end";
  GradeResult r;
  std::ostringstream out;
  r.card = Scorecard(false, &out);
  Check c = Check::failure("adds", Kind::kCorrectness, "c guard bands: out-of-bounds write past the end");
  r.card.add(c);
  r.exit_code = 1;
  CHECK(plant_verdict(p, p.expect, r).empty());
  p.expect.detail = "before the start";
  CHECK(plant_verdict(p, p.expect, r) == "check \"adds\" did not fail with \"before the start\"");
  p.expect.exit = {0, 2};
  CHECK(plant_verdict(p, p.expect, r) == "exit 1, expected [0,2]");
}

TEST_CASE("a changed tree names the first file that changed", "[cpu]") {
  const TreeHashes before = {{"a.cu", "1"}, {"b.cu", "2"}};
  CHECK(first_tree_change(before, before, "labs/x/").empty());
  CHECK(first_tree_change(before, {{"a.cu", "1"}, {"b.cu", "3"}}, "labs/x/") == "labs/x/b.cu changed");
  CHECK(first_tree_change(before, {{"a.cu", "1"}}, "") == "b.cu was removed");
  CHECK(first_tree_change(before, {{"a.cu", "1"}, {"b.cu", "2"}, {"c.cu", "4"}}, "") == "c.cu was added");
}

TEST_CASE("selftest's time table files each row under its stage", "[cpu]") {
  using gpulab::cli::stage_of;
  CHECK(stage_of("build (everything, skeletons and mutants included)") == "build");
  CHECK(stage_of("unit tests (ctest)") == "unit tests");
  CHECK(stage_of("lab 04 mutant 04.2 fails its tests") == "mutants");
  CHECK(stage_of("lab 04 skeleton fails its tests") == "mutants");
  CHECK(stage_of("lab 07 skeleton and mutants keep the symbol rules") == "symbols");
  CHECK(stage_of("lab 09 reference graded") == "reference");
  CHECK(stage_of("lab 08 planted: calls MPI_Allreduce directly") == "plants");
  CHECK(stage_of("lab 08 lesson has a section per TODO") == "lesson");
  CHECK(stage_of("sync --check") == "sync");
  CHECK(stage_of("every lab.json loads") == "other");
}
