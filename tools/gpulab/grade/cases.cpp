/// @file cases.cpp
/// @brief Running and judging one test case (see cases.hpp).
#include "grade/cases.hpp"

#include <algorithm>
#include <cstdio>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "gpulab/report.hpp"
#include "run/mpi.hpp"

namespace gpulab::cli {
namespace {

std::string fixed0(double v) { return std::to_string(static_cast<long long>(v + 0.5)); }

/// A fresh token per run: a completion record carries it back, so that one left over (or written
/// by anything but this run's test runner) never counts.
std::string fresh_token() {
  static std::random_device device;
  char text[33];
  std::snprintf(text, sizeof text, "%08x%08x%08x%08x", device(), device(), device(), device());
  return text;
}

/// Every rank's output, each line prefixed "[rank r] ", after mpirun's own.
std::string merged_rank_output(const MpiRun& m) {
  std::string all = m.process.output;
  for (std::size_t r = 0; r < m.rank_output.size(); ++r) {
    std::istringstream in(m.rank_output[r]);
    for (std::string line; std::getline(in, line);) all += "[rank " + std::to_string(r) + "] " + line + "\n";
  }
  return all;
}

/// Failures by message; in a distributed case, with the ranks that reported each.
struct Findings {
  std::vector<std::pair<std::string, std::vector<int>>> failures;
  std::vector<std::string> not_run, info;
  std::vector<std::string> passed;  ///< the checks that held, with their figures (rank 0's; --verbose shows them)
  std::set<std::string> hints;
};

Findings read_records(const std::vector<nlohmann::json>& records) {
  Findings f;
  for (const auto& rec : records) {
    if (rec.contains("not_run")) {
      const std::string text = rec.value("summary", "");
      if (std::find(f.not_run.begin(), f.not_run.end(), text) == f.not_run.end()) f.not_run.push_back(text);
    }
    if (rec.value("kind", "") == "info" && rec.value("rank", 0) == 0) f.info.push_back(rec.value("summary", ""));
    // "ok": false is a failed check; null marks a check that could not run (not_run, above).
    const auto ok = rec.find("ok");
    if (ok != rec.end() && ok->is_boolean() && ok->get<bool>() && rec.value("rank", 0) == 0) {
      const std::string text = rec.value("summary", "");
      if (!text.empty() && std::find(f.passed.begin(), f.passed.end(), text) == f.passed.end()) f.passed.push_back(text);
    }
    if (ok == rec.end() || !ok->is_boolean() || ok->get<bool>()) continue;
    const std::string text = rec.value("summary", rec.dump());
    auto it = std::find_if(f.failures.begin(), f.failures.end(), [&](const auto& x) { return x.first == text; });
    if (it == f.failures.end()) it = f.failures.insert(f.failures.end(), {text, {}});
    if (rec.contains("rank")) it->second.push_back(rec["rank"].get<int>());
    if (rec.contains("hint") && f.hints.size() < 2) f.hints.insert(rec["hint"].get<std::string>());
  }
  return f;
}

std::vector<std::string> failure_lines(const Findings& f) {
  std::vector<std::string> lines;
  for (const auto& [text, ranks] : f.failures) {
    if (lines.size() >= 5) break;
    std::string who;
    for (int r : ranks) who += (who.empty() ? "" : ",") + std::to_string(r);
    lines.push_back(ranks.empty() ? text : (ranks.size() > 1 ? "ranks " : "rank ") + who + ": " + text);
  }
  return lines;
}

}  // namespace

CaseRun run_case(const RunSpec& spec) {
  const fs::path report = spec.log_dir / (spec.stem + ".jsonl");
  ProcessOptions o;
  o.timeout_s = spec.timeout_s;
  o.env = spec.env;
  o.env["GPULAB_REPORT"] = report.string();
  o.env["GPULAB_SEED"] = std::to_string(spec.seed);
  o.env["NVIDIA_TF32_OVERRIDE"] = "0";  // fp32 baselines stay fp32 whatever the caller's environment says
  o.read_only = spec.read_only;
  const std::vector<std::string> command = {spec.exe, spec.case_name, "--reporter", "compact", "--durations", "no"};
  CaseRun run;
  run.token = fresh_token();
  run.ranks = spec.ranks;
  o.env["GPULAB_RUN_TOKEN"] = run.token;
  if (spec.ranks > 0) {
    const MpiRun m = run_mpi(spec.ranks, spec.log_dir / (spec.stem + "-ranks"), command, o);
    run.process = m.process;
    run.problems = m.problems;
    if (!m.leftovers.empty()) {
      run.problems.push_back(std::to_string(m.leftovers.size()) + " process(es) of the program were still running afterwards (now killed)");
    }
    run.process.output = merged_rank_output(m);
    for (int r = 0; r < spec.ranks; ++r) {
      const fs::path rank_report = report.string() + ".rank" + std::to_string(r);
      if (!fs::exists(rank_report)) continue;
      for (auto& rec : gpulab::report::read_file(rank_report.string())) run.records.push_back(std::move(rec));
    }
  } else {
    run.process = run_process(command, o);
    if (fs::exists(report)) run.records = gpulab::report::read_file(report.string());
  }
  write_text(spec.log_dir / (spec.stem + ".log"), run.process.output);
  static const std::regex skipped(R"(gpulab: SKIPPED \d+ \[gpu\] case\(s\): (.*))");
  std::smatch m;
  if (std::regex_search(run.process.output, m, skipped)) run.skip_reason = m[1].str();
  return run;
}

std::vector<std::string> catch_failures(const std::string& output) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line) && lines.size() < 4;) {
    // Catch2's failures, and the emulator's own findings ("runtime error: ...", "emulate: ...").
    if (line.find(": failed:") == std::string::npos && line.find("FAILED") == std::string::npos &&
        line.find("runtime error: ") == std::string::npos && line.rfind("emulate: ", 0) != 0) {
      continue;
    }
    const std::size_t msg = line.find("unexpected exception with message:");
    const std::string entry = msg != std::string::npos ? line.substr(msg) : line;
    if (std::find(lines.begin(), lines.end(), entry) == lines.end()) lines.push_back(entry);
  }
  return lines;
}

Completion read_completion(const CaseRun& run, const std::string& case_name) {
  Completion done;
  std::map<int, int> per_rank;
  int skipped = 0;
  for (const auto& rec : run.records) {
    if (rec.value("kind", "") != "completion" || rec.value("case", "") != case_name) continue;
    if (rec.value("token", "") != run.token) continue;  // not this run's: never evidence
    ++done.records;
    if (++per_rank[rec.value("rank", 0)] == 2) ++done.duplicates;
    if (rec.contains("skipped")) {
      ++skipped;
      done.skip_reason = rec.value("skipped", "");
    }
    done.passed += rec.value("assertions_passed", 0L);
    done.failed += rec.value("assertions_failed", 0L);
  }
  done.skipped = skipped > 0 && skipped == done.records;
  done.skipped_records = skipped;
  return done;
}

namespace {

/// The verdict when the process ended normally (exit 0 or 1) with its evidence in hand.
void judge_ended(const CaseInfo& c, const CaseRun& run, const JudgeContext& context, const Findings& found, Check& check) {
  const ProcessResult& p = run.process;
  const int ranks = std::max(1, run.ranks);
  const Completion done = read_completion(run, c.name);
  if (done.duplicates > 0 || done.records > ranks) {
    check.details.insert(check.details.begin(), "more than one completion record for this case: something other than the test runner wrote them");
    return;
  }
  if (done.records < ranks) {
    check.details.insert(check.details.begin(), "ended before its checks finished (" + p.describe() +
                                                    (run.ranks > 0 ? ", " + std::to_string(ranks - done.records) + " rank(s) without a completion record" : "") +
                                                    "): something in the code under test ended the process");
    for (const std::string& line : catch_failures(p.output)) {
      if (check.details.size() < 6) check.details.push_back(line);  // e.g. the sanitizer's "runtime error: ..."
    }
    return;
  }
  if (done.skipped_records > 0) {
    // A skip ends the runner with exit 77 (judge_skip); a skip's record beside exit 0 or 1 is not
    // a run of the case, whatever else the process wrote.
    check.details.insert(check.details.begin(), "its record says the case was skipped (" + done.skip_reason + "), yet the process " + p.describe() +
                                                    " instead of exit 77: something in the code under test ended it; a skipped case is never a pass");
    return;
  }
  if (!p.exited(0) || done.failed > 0 || !found.failures.empty()) {
    // failed checks; add Catch2's own message when no record explains it
    const std::vector<std::string> own = catch_failures(p.output);
    if (check.details.empty()) check.details = own;
    for (const std::string& line : own) {
      if (line.rfind("unexpected exception", 0) == 0 && check.details.size() < 6) check.details.push_back(line);
    }
    if (check.details.empty()) check.details.push_back("failed (see the log)");
    return;
  }
  if (!found.not_run.empty()) {
    check.status = Status::kNotRun;
    check.details = found.not_run;
    return;
  }
  if (context.reference_assertions > 0 && done.passed < context.reference_assertions) {
    check.details = {"ran " + std::to_string(done.passed) + " of the reference's " + std::to_string(context.reference_assertions) +
                     " checks on this case: the case did not run to its end"};
    check.data["fewer_assertions"] = true;
    return;
  }
  check.status = Status::kPass;
  check.details = found.info;  // what a test reports for the learner's information, shown on a pass too
  check.data["assertions"] = done.passed;
}

/// Exit 77: "no GPU" only for a [gpu] case, on a machine the grader found without one, with the
/// runner's own record of the skip.
void judge_skip(const CaseInfo& c, const CaseRun& run, const JudgeContext& context, Check& check) {
  const Completion done = read_completion(run, c.name);
  if (c.where == "gpu" && !context.gpu_missing.empty() && done.skipped && done.records >= std::max(1, run.ranks)) {
    check.status = Status::kNotRun;
    check.details = {"needs a GPU: " + (run.skip_reason.empty() ? context.gpu_missing : run.skip_reason)};
    return;
  }
  check.details.insert(check.details.begin(),
                       "exit 77, which is reserved for \"no GPU\"" +
                           std::string(c.where != "gpu" ? ": this case needs none" : context.gpu_missing.empty() ? ": this machine has one" : "") +
                           " (something in the code under test ended the process)");
}

}  // namespace

Check judge_case(const CaseInfo& c, const CaseRun& run, const LabConfig& lab, const JudgeContext& context) {
  Check check;
  check.name = c.name;
  check.kind = Kind::kCorrectness;
  check.where = where_from_string(c.where);
  check.seconds = run.process.seconds;
  const ProcessResult& p = run.process;
  const Findings found = read_records(run.records);
  std::set<std::string> hints = found.hints;
  check.details = failure_lines(found);
  if (!run.problems.empty()) {
    check.details.insert(check.details.begin(), run.problems.begin(), run.problems.end());
    // A fault the grader injected (--fault) explains the failure; the lab's hints would blame the code.
    const bool injected = std::any_of(run.problems.begin(), run.problems.end(),
                                      [](const std::string& line) { return line.rfind("fault injected", 0) == 0; });
    hints.insert(injected ? std::string("the grader injected this fault (--fault): how a run fails when a rank or a link is lost, not a fault in your code")
                          : p.timed_out ? lab.timeout_hint : lab.crash_hint);
  } else if (p.timed_out) {
    check.details.insert(check.details.begin(), "did not finish within " + fixed0(context.timeout_s) + " s; the process was killed");
    hints.insert(lab.timeout_hint);
  } else if (p.exited(77)) {
    judge_skip(c, run, context, check);
  } else if (p.signal != 0 || (p.exit_code != 1 && p.exit_code != 0)) {
    check.details.insert(check.details.begin(), "the test process " + p.describe());
    hints.insert(lab.crash_hint);
  } else {
    judge_ended(c, run, context, found, check);
  }
  if (p.timed_out) check.data["hung"] = true;
  if (!found.passed.empty()) check.data["facts"] = found.passed;  // every check that held, with its figures
  if (check.status != Status::kFail) hints.clear();
  check.hints.assign(hints.begin(), hints.end());
  check.data["process"] = p.describe();
  check.data["records"] = run.records;
  return check;
}

void mark_stretch(const CaseInfo& c, Check& check) {
  if (!c.stretch()) return;
  // Which work the case credits, by its TODO tags: a case may run a stretch configuration of an
  // earlier TODO (lab 09's executor on the tests' interleaved schedule is 09.4's, not 09.5's).
  static const std::regex todo(R"(\[(\d\d\.\d+)\])");
  std::string todos;
  for (auto it = std::sregex_iterator(c.tags.begin(), c.tags.end(), todo); it != std::sregex_iterator(); ++it) {
    todos += (todos.empty() ? "TODO " : ", ") + (*it)[1].str();
  }
  const std::string goal = "a stretch goal" + (todos.empty() ? std::string() : " of " + todos);
  if (check.status == Status::kFail || check.status == Status::kEmuFail) {
    check.status = Status::kStretch;
    check.details.push_back(goal + ": not counted in the result");
  } else if (check.status == Status::kPass || check.status == Status::kEmuPass) {
    check.details.push_back(goal + ", reached");
  }
}

std::string device_missing(const std::string& exe) {
  ProcessOptions o;
  o.timeout_s = 60;
  const ProcessResult r = run_process({exe, "--gpulab-probe"}, o);
  if (r.exited(0)) return "";
  std::string why = r.output;
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  return r.exited(77) ? why : "the device probe " + r.describe() + (why.empty() ? "" : ": " + why);
}

}  // namespace gpulab::cli
