/// @file selftest_variants.cpp
/// @brief selftest's table, and the skeleton and mutants that must fail (see selftest_table.hpp).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>

#include "author/selftest_table.hpp"
#include "base/process.hpp"
#include "run/mpi.hpp"

namespace gpulab::cli {

namespace {

/// "7.3 s", "2 m 05 s".
std::string format_seconds(double seconds) {
  char text[32];
  if (seconds < 60) std::snprintf(text, sizeof text, "%.1f s", seconds);
  else std::snprintf(text, sizeof text, "%d m %02d s", static_cast<int>(seconds) / 60, static_cast<int>(seconds) % 60);
  return text;
}

}  // namespace

void Table::add(const std::string& step, const std::string& status, const std::string& detail) {
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  rows_.push_back({step, status, detail, seconds});
  std::cout << "selftest: " << (status == "pass" ? "PASS" : status == "fail" ? "FAIL" : "SKIP") << "  " << step
            << (detail.empty() ? "" : "  — " + detail) << "  [" << format_seconds(seconds) << "]" << std::endl;
}

std::string stage_of(const std::string& step) {
  if (step.rfind("build", 0) == 0) return "build";
  if (step.rfind("unit tests", 0) == 0) return "unit tests";
  if (step.rfind("sync --check", 0) == 0) return "sync";
  if (step.rfind("class: ", 0) == 0) return "class";
  if (step.rfind("lab ", 0) != 0) return "other";
  if (step.find(" planted: ") != std::string::npos) return "plants";
  if (step.find(" fails its tests") != std::string::npos) return "mutants";
  if (step.find(" keep the symbol rules") != std::string::npos) return "symbols";
  if (step.find(" reference graded") != std::string::npos) return "reference";
  if (step.find(" lesson ") != std::string::npos || step.find(" plants") != std::string::npos) return "lesson";
  return "other";
}

nlohmann::json Table::rows_json() const {
  nlohmann::json rows = nlohmann::json::array();
  for (const Row& r : rows_) rows.push_back({{"step", r.step}, {"status", r.status}, {"detail", r.detail}, {"seconds", r.seconds}});
  return rows;
}

void Table::append(const nlohmann::json& rows) {
  for (const auto& r : rows) rows_.push_back({r.value("step", ""), r.value("status", "fail"), r.value("detail", ""), r.value("seconds", 0.0)});
  last_ = std::chrono::steady_clock::now();
}

int Table::finish() const {
  int passed = 0, failed = 0, skipped = 0;
  nlohmann::json rows = nlohmann::json::array();
  std::cout << "\n================================ selftest summary ================================\n";
  // Seconds by stage (columns) and by lab (rows; "" for the steps of no lab).
  std::map<std::string, std::map<std::string, double>> by_lab;
  std::map<std::string, double> by_stage;
  double total = 0;
  for (const Row& r : rows_) {
    std::cout << "  " << (r.status == "pass" ? "PASS" : r.status == "fail" ? "FAIL" : "SKIP") << "  " << r.step
              << (r.detail.empty() ? "" : "  — " + r.detail) << '\n';
    passed += r.status == "pass";
    failed += r.status == "fail";
    skipped += r.status == "skip";
    const std::string stage = stage_of(r.step);
    const std::string lab = r.step.rfind("lab ", 0) == 0 ? r.step.substr(4, r.step.find(' ', 4) - 4) : "";
    by_lab[lab][stage] += r.seconds;
    by_stage[stage] += r.seconds;
    total += r.seconds;
    rows.push_back({{"step", r.step}, {"status", r.status}, {"detail", r.detail}, {"stage", stage}, {"seconds", r.seconds}});
  }
  std::cout << "\n  where the time went (seconds; each step's time runs from the row before it to its own)\n"
               "  mutants: the skeleton and each mutant fail their tests; symbols: they keep the symbol rules;\n"
               "  reference: the reference graded; lesson: a section per TODO and the plants' manifest\n";
  std::cout << "  " << std::string(6, ' ');
  for (const auto& [stage, s] : by_stage) std::printf(" %10.10s", stage.c_str());
  std::printf(" %9s\n", "total");
  std::cout.flush();
  for (const auto& [lab, stages] : by_lab) {
    double sum = 0;
    std::printf("  %-6s", lab.empty() ? "-" : ("lab " + lab).c_str());
    for (const auto& [stage, s] : by_stage) {
      const auto it = stages.find(stage);
      sum += it == stages.end() ? 0 : it->second;
      if (it == stages.end()) std::printf(" %10s", "");
      else std::printf(" %10.1f", it->second);
    }
    std::printf(" %9.1f\n", sum);
  }
  std::printf("  %-6s", "all");
  for (const auto& [stage, s] : by_stage) std::printf(" %10.1f", s);
  std::printf(" %9.1f\n", total);
  if (wall_seconds_ > 0) {
    std::printf("  (the labs ran side by side: %.0f s of steps in %.0f s of wall time)\n", total, wall_seconds_);
  }
  std::printf("\n");
  std::fflush(stdout);
  nlohmann::json stages = nlohmann::json::object();
  for (const auto& [stage, s] : by_stage) stages[stage] = s;
  write_text(json_file_, nlohmann::json{{"rows", rows}, {"passed", passed}, {"failed", failed}, {"skipped", skipped},
                                        {"seconds", total}, {"wall_seconds", wall_seconds_ > 0 ? wall_seconds_ : total},
                                        {"seconds_by_stage", stages}}.dump(2) + "\n");
  std::cout << "selftest: " << passed << " passed, " << failed << " failed, " << skipped << " skipped"
            << " in " << format_seconds(wall_seconds_ > 0 ? wall_seconds_ : total) << std::endl;
  return failed == 0 ? 0 : 1;
}

bool gpu_visible() {
  ProcessOptions o;
  o.timeout_s = 30;
  const ProcessResult r = run_process({"nvidia-smi", "-L"}, o);
  return r.exited(0) && r.output.find("GPU 0") != std::string::npos;
}

namespace {

/// Runs a variant's tests (not [perf], [big] or, on the emulator, [timing]; with @p focus only the
/// cases of that tag) to its first failure: exit 1 (or a time-out) is a kill; 77 means its [gpu]
/// cases need a GPU; 0 means unnoticed. Distributed labs run under mpirun at each width until one fails.
ProcessResult run_variant(const LabConfig& lab, const std::string& exe, bool emulated, const std::string& focus, const fs::path& logs,
                          std::string& how) {
  ProcessOptions o;
  o.timeout_s = lab.timeout_s;
  o.env = {{"GPULAB_SEED", "12345"}};
  if (emulated) o.env["GPULAB_SMALL"] = "1";
  const std::string spec = (focus.empty() ? "" : "[" + focus + "]") + (emulated ? "~[perf]~[big]~[timing]" : "~[perf]~[big]");
  const std::vector<std::string> command = {exe, spec, "--reporter", "compact"};
  const std::string which = focus.empty() ? "" : " (its TODO's cases, [" + focus + "])";
  if (!lab.distributed()) {
    // --abort: stop at the first failure, which is all this needs to know. (Not under MPI: one
    // rank stopping early would leave the others waiting.)
    std::vector<std::string> abort_early = command;
    abort_early.push_back("--abort");
    const ProcessResult r = run_process(abort_early, o);
    how = r.describe() + which + (emulated ? " on the CPU emulator" : "");
    return r;
  }
  ProcessResult r;
  for (int w : lab.mpi_ranks) {
    r = run_mpi(w, logs, command, o).process;
    how = r.describe() + which + " at W=" + std::to_string(w);
    if (!r.exited(0)) break;
  }
  return r;
}

/// Whether the reference lists a case tagged [@p tag] that a run of that kind selects (a filter
/// that matches nothing is an error, which must never read as a kill).
bool selects_any(const std::vector<CaseInfo>& cases, const std::string& tag, bool emulated) {
  return std::any_of(cases.begin(), cases.end(), [&](const CaseInfo& c) {
    return c.has_tag(tag) && !c.perf() && !c.has_tag("big") && (!emulated || (c.where == "gpu" && !c.has_tag("timing")));
  });
}

/// The variant must fail its tests: natively, else (its [gpu] cases needing a GPU) on the
/// emulator. A mutant of region R runs the cases tagged [R] first, where a stubbed region is most
/// likely seen, and all the cases only when those pass: the verdict is the same (some case
/// fails), reached in a fraction of the time — a mutant of lab 04's last rung no longer trains
/// four models and emulates three other rungs before its own case.
void expect_failure(const LabConfig& lab, const std::string& what, const std::string& region, const std::vector<CaseInfo>& cases,
                    const Variant* native, const Variant* emulated, const fs::path& logs, Table& table) {
  std::string how;
  ProcessResult r;
  bool killed = false;
  if (!region.empty() && selects_any(cases, region, false)) {
    r = run_variant(lab, native->exe, false, region, logs, how);
    killed = !r.exited(0) && !r.exited(77);
    if (!killed && r.exited(77) && emulated != nullptr && selects_any(cases, region, true)) {
      r = run_variant(lab, emulated->exe, true, region, logs, how);
      killed = !r.exited(0) && !r.exited(77);
    }
  }
  if (!killed) {
    r = run_variant(lab, native->exe, false, "", logs, how);
    if (r.exited(77) && emulated != nullptr) r = run_variant(lab, emulated->exe, true, "", logs, how);
  }
  const std::string row = "lab " + lab.number + " " + what + " fails its tests";
  if (r.exited(77)) {
    table.add(row, "skip", "its [cpu] cases pass; the [gpu] cases that would catch it need a GPU");
  } else if (r.exited(0)) {
    table.add(row, emulated != nullptr ? "skip" : "fail",
              emulated != nullptr ? "its [cpu] cases pass and the CPU emulator does not notice it: the [gpu] cases need a GPU"
                                  : "every test passed: the tests do not notice this change");
  } else {
    table.add(row, "pass", how);
  }
}

}  // namespace

void check_variants_fail(const Paths& paths, const LabConfig& lab, bool gpu, Table& table) {
  const fs::path logs = paths.build / "selftest" / ("mpi-" + lab.number);
  const BuildInfo& b = lab.build;
  // The emulator stands in only where no GPU can run the native [gpu] cases.
  auto emu = [&](const Variant* v) { return gpu ? nullptr : v; };
  const std::vector<CaseInfo> cases = listed_cases(paths, lab);
  expect_failure(lab, "skeleton", "", cases, b.variant("skeleton"), emu(b.variant("emu_skeleton")), logs, table);
  for (const RegionInfo& r : b.regions) {
    const auto native = b.mutants.find(r.id);
    const auto emulated = b.emu_mutants.find(r.id);
    if (native == b.mutants.end()) continue;
    expect_failure(lab, "mutant " + r.id, r.id, cases, &native->second, emulated == b.emu_mutants.end() ? nullptr : emu(&emulated->second), logs,
                   table);
  }
}

}  // namespace gpulab::cli
