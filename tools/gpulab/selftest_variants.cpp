/// @file selftest_variants.cpp
/// @brief selftest's table, and the skeleton and mutants that must fail (see selftest_table.hpp).
#include <iostream>

#include "mpi.hpp"
#include "process.hpp"
#include "selftest_table.hpp"

namespace gpulab::cli {

void Table::add(const std::string& step, const std::string& status, const std::string& detail) {
  rows_.push_back({step, status, detail});
  std::cout << "selftest: " << (status == "pass" ? "PASS" : status == "fail" ? "FAIL" : "SKIP") << "  " << step
            << (detail.empty() ? "" : "  — " + detail) << std::endl;
}

int Table::finish() const {
  int passed = 0, failed = 0, skipped = 0;
  nlohmann::json rows = nlohmann::json::array();
  std::cout << "\n================================ selftest summary ================================\n";
  for (const Row& r : rows_) {
    std::cout << "  " << (r.status == "pass" ? "PASS" : r.status == "fail" ? "FAIL" : "SKIP") << "  " << r.step
              << (r.detail.empty() ? "" : "  — " + r.detail) << '\n';
    passed += r.status == "pass";
    failed += r.status == "fail";
    skipped += r.status == "skip";
    rows.push_back({{"step", r.step}, {"status", r.status}, {"detail", r.detail}});
  }
  write_text(json_file_, nlohmann::json{{"rows", rows}, {"passed", passed}, {"failed", failed}, {"skipped", skipped}}.dump(2) + "\n");
  std::cout << "selftest: " << passed << " passed, " << failed << " failed, " << skipped << " skipped" << std::endl;
  return failed == 0 ? 0 : 1;
}

bool gpu_visible() {
  ProcessOptions o;
  o.timeout_s = 30;
  const ProcessResult r = run_process({"nvidia-smi", "-L"}, o);
  return r.exited(0) && r.output.find("GPU 0") != std::string::npos;
}

namespace {

/// Runs a variant's tests (not [perf], [big] or, on the emulator, [timing]) to its first failure:
/// exit 1 (or a time-out) is a kill; 77 means its [gpu] cases need a GPU; 0 means unnoticed.
/// Distributed labs run under mpirun at each width until one fails.
ProcessResult run_variant(const LabConfig& lab, const std::string& exe, bool emulated, const fs::path& logs, std::string& how) {
  ProcessOptions o;
  o.timeout_s = lab.timeout_s;
  o.env = {{"GPULAB_SEED", "12345"}};
  if (emulated) o.env["GPULAB_SMALL"] = "1";
  const std::vector<std::string> command = {exe, emulated ? "~[perf]~[big]~[timing]" : "~[perf]~[big]", "--reporter", "compact"};
  if (!lab.distributed()) {
    // --abort: stop at the first failure, which is all this needs to know. (Not under MPI: one
    // rank stopping early would leave the others waiting.)
    std::vector<std::string> abort_early = command;
    abort_early.push_back("--abort");
    const ProcessResult r = run_process(abort_early, o);
    how = r.describe() + (emulated ? " on the CPU emulator" : "");
    return r;
  }
  ProcessResult r;
  for (int w : lab.mpi_ranks) {
    r = run_mpi(w, logs, command, o).process;
    how = r.describe() + " at W=" + std::to_string(w);
    if (!r.exited(0)) break;
  }
  return r;
}

void expect_failure(const LabConfig& lab, const std::string& what, const Variant* native, const Variant* emulated, const fs::path& logs,
                    Table& table) {
  std::string how;
  ProcessResult r = run_variant(lab, native->exe, false, logs, how);
  if (r.exited(77) && emulated != nullptr) r = run_variant(lab, emulated->exe, true, logs, how);
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
  expect_failure(lab, "skeleton", b.variant("skeleton"), emu(b.variant("emu_skeleton")), logs, table);
  for (const RegionInfo& r : b.regions) {
    const auto native = b.mutants.find(r.id);
    const auto emulated = b.emu_mutants.find(r.id);
    if (native == b.mutants.end()) continue;
    expect_failure(lab, "mutant " + r.id, &native->second, emulated == b.emu_mutants.end() ? nullptr : emu(&emulated->second), logs, table);
  }
}

}  // namespace gpulab::cli
