/// @file cases.cpp
/// @brief Running and judging one test case (see cases.hpp).
#include "cases.hpp"

#include <algorithm>
#include <regex>
#include <set>
#include <sstream>

#include "gpulab/report.hpp"
#include "mpi.hpp"

namespace gpulab::cli {
namespace {

std::string fixed0(double v) { return std::to_string(static_cast<long long>(v + 0.5)); }

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
  const std::vector<std::string> command = {spec.exe, spec.case_name, "--reporter", "compact", "--durations", "no"};
  CaseRun run;
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
    // Catch2's failures, and the emulator's sanitizer ("runtime error: load of misaligned address").
    if (line.find(": failed:") != std::string::npos || line.find("FAILED") != std::string::npos ||
        line.find("runtime error: ") != std::string::npos) {
      const std::size_t msg = line.find("unexpected exception with message:");
      lines.push_back(msg != std::string::npos ? line.substr(msg) : line);
    }
  }
  return lines;
}

Check judge_case(const CaseInfo& c, const CaseRun& run, const LabConfig& lab, double timeout_s) {
  Check check;
  check.name = c.name;
  check.kind = Kind::kCorrectness;
  check.where = where_from_string(c.where);
  check.seconds = run.process.seconds;
  const ProcessResult& p = run.process;
  const Findings found = read_records(run.records);
  std::set<std::string> hints = found.hints;
  check.details = failure_lines(found);
  if (p.exited(0) && run.problems.empty()) {
    check.status = found.not_run.empty() ? Status::kPass : Status::kNotRun;
    check.details = found.not_run;
    // What a test reports for the learner's information (e.g. a sweep), shown on a pass too.
    check.details.insert(check.details.end(), found.info.begin(), found.info.end());
  } else if (p.exited(77)) {
    check.status = Status::kNotRun;
    check.details = {"needs a GPU: " + (run.skip_reason.empty() ? std::string("no CUDA device") : run.skip_reason)};
  } else if (!run.problems.empty()) {
    check.details.insert(check.details.begin(), run.problems.begin(), run.problems.end());
    hints.insert(p.timed_out ? lab.timeout_hint : lab.crash_hint);
  } else if (p.timed_out) {
    check.details.insert(check.details.begin(), "did not finish within " + fixed0(timeout_s) + " s; the process was killed");
    hints.insert(lab.timeout_hint);
  } else if (p.signal != 0 || (p.exit_code != 1 && p.exit_code != 0)) {
    check.details.insert(check.details.begin(), "the test process " + p.describe());
    hints.insert(lab.crash_hint);
  } else {
    // exit 1: failed checks; add Catch2's own message when no record explains it
    const std::vector<std::string> own = catch_failures(p.output);
    if (check.details.empty()) check.details = own;
    for (const std::string& line : own) {
      if (line.rfind("unexpected exception", 0) == 0 && check.details.size() < 6) check.details.push_back(line);
    }
    if (check.details.empty()) check.details.push_back("failed (see the log)");
  }
  check.hints.assign(hints.begin(), hints.end());
  check.data = {{"process", p.describe()}, {"records", run.records}};
  return check;
}

void mark_stretch(const CaseInfo& c, Check& check) {
  if (!c.stretch()) return;
  if (check.status == Status::kFail || check.status == Status::kEmuFail) {
    check.status = Status::kStretch;
    check.details.push_back("a stretch goal: not counted in the result");
  } else if (check.status == Status::kPass || check.status == Status::kEmuPass) {
    check.details.push_back("a stretch goal, reached");
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
