/// @file selftest.cpp
/// @brief The project's own test run (see selftest.hpp).
#include "selftest.hpp"

#include <algorithm>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>

#include "build.hpp"
#include "grade.hpp"
#include "mpi.hpp"
#include "process.hpp"
#include "sync.hpp"

namespace gpulab::cli {
namespace {

struct Row {
  std::string step;
  std::string status;  // pass, fail, skip
  std::string detail;
};

class Table {
 public:
  void add(const std::string& step, const std::string& status, const std::string& detail) {
    rows_.push_back({step, status, detail});
    std::cout << "selftest: " << (status == "pass" ? "PASS" : status == "fail" ? "FAIL" : "SKIP")
              << "  " << step << (detail.empty() ? "" : "  — " + detail) << std::endl;
  }
  int print() const {
    int passed = 0, failed = 0, skipped = 0;
    std::cout << "\n================================ selftest summary ================================\n";
    for (const Row& r : rows_) {
      const char* word = r.status == "pass" ? "PASS" : r.status == "fail" ? "FAIL" : "SKIP";
      std::cout << "  " << word << "  " << r.step;
      if (!r.detail.empty()) std::cout << "  — " << r.detail;
      std::cout << '\n';
      passed += r.status == "pass";
      failed += r.status == "fail";
      skipped += r.status == "skip";
    }
    std::cout << "selftest: " << passed << " passed, " << failed << " failed, " << skipped
              << " skipped" << std::endl;
    return failed == 0 ? 0 : 1;
  }

 private:
  std::vector<Row> rows_;
};

bool gpu_visible() {
  ProcessOptions o;
  o.timeout_s = 30;
  const ProcessResult r = run_process({"nvidia-smi", "-L"}, o);
  return r.exited(0) && r.output.find("GPU 0") != std::string::npos;
}

/// CTest, with the counts and the names of the GPU-labelled cases that passed.
void run_ctest(const Paths& paths, const std::string& label, Table& table) {
  ProcessOptions o;
  o.timeout_s = 3600;
  o.echo = true;
  std::vector<std::string> argv = {"ctest", "--test-dir", paths.build.string(), "-j",
                                   std::to_string(build_jobs()), "--output-on-failure", "--no-tests=error"};
  if (!label.empty()) argv.insert(argv.end(), {"-L", label});
  const bool gpu_here = gpu_visible();
  ProcessResult r;
  if (gpu_here) {
    // With a GPU, the labs' [gpu] reference cases run next, in `grade --solutions` (which also
    // times them); running them here too would double the GPU time. CTest runs everything else:
    // every [cpu] case, then the unit tests' [gpu] cases.
    std::vector<std::string> cpu_part = argv, unit_gpu = argv;
    cpu_part.insert(cpu_part.end(), {"-LE", "gpu"});
    unit_gpu.insert(unit_gpu.end(), {"-L", "gpu", "-R", "^unit_"});
    r = run_process(cpu_part, o);
    const ProcessResult second = run_process(unit_gpu, o);
    const std::string both = r.output + second.output;
    if (r.exited(0)) r = second;  // the verdict: the first failure, else the second run's
    r.output = both;
  } else {
    r = run_process(argv, o);
  }
  // "  3/25 Test  #3: lab01_ref: vector_add at awkward sizes ...   Passed    0.01 sec"
  static const std::regex row(R"(Test +#\d+: (.+?) \.+\s*(\*\*\*)?(Passed|Failed|Skipped|Not Run|Timeout|Exception)?)");
  std::set<std::string> passed_names;
  int passed = 0, failed = 0, skipped = 0;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    const std::string outcome = m[3].str();
    if (line.find("Skipped") != std::string::npos || line.find("Not Run") != std::string::npos) {
      ++skipped;
    } else if (outcome == "Passed") {
      ++passed;
      passed_names.insert(m[1].str());
    } else {
      ++failed;
    }
  }
  const bool gpu = gpu_here;
  table.add("ctest", r.exited(0) && failed == 0 ? "pass" : "fail",
            std::to_string(passed) + " passed, " + std::to_string(failed) + " failed, " +
                std::to_string(skipped) + " skipped" + (gpu ? "" : " (GPU cases without a GPU)"));
  if (gpu) {
    // With a GPU every case must run: a skip here means the device was not usable.
    table.add("ctest: every [gpu] unit case ran on the visible GPU", skipped == 0 ? "pass" : "fail",
              skipped == 0 ? "the labs' [gpu] cases run in `grade --solutions` below"
                           : std::to_string(skipped) + " skipped although nvidia-smi lists a GPU");
  } else {
    // Honesty check: without a GPU no [gpu] case may report passed.
    const ProcessResult listed = run_process({"ctest", "--test-dir", paths.build.string(), "-N", "-L", "gpu"}, {});
    std::istringstream names(listed.output);
    int gpu_cases = 0;
    std::vector<std::string> wrongly_passed;
    static const std::regex listed_row(R"(Test +#\d+: (.+)$)");
    for (std::string line; std::getline(names, line);) {
      std::smatch m;
      if (!std::regex_search(line, m, listed_row)) continue;
      ++gpu_cases;
      if (passed_names.count(m[1].str())) wrongly_passed.push_back(m[1].str());
    }
    table.add("ctest: no [gpu] case passes without a GPU", wrongly_passed.empty() ? "pass" : "fail",
              wrongly_passed.empty() ? std::to_string(gpu_cases) + " [gpu] cases, none reported passed"
                                     : "reported passed: " + wrongly_passed.front());
  }
}

/// A variant that must fail: exit 1 (or a time-out) is a kill; 77 means it needs a GPU to be
/// judged; 0 means the tests did not notice it. Distributed labs run under mpirun at each width
/// until one fails.
void expect_failure(const std::string& what, const std::string& exe, const nlohmann::json& info,
                    const fs::path& logs, Table& table) {
  ProcessOptions o;
  o.timeout_s = info.value("timeout_s", 120.0);
  o.env = {{"GPULAB_SEED", "12345"}};
  // Performance and very large cases add minutes and catch nothing the others miss.
  const std::vector<std::string> command = {exe, "~[perf]~[big]", "--reporter", "compact"};
  const std::vector<int> widths = info.value("mpi_ranks", std::vector<int>{});
  ProcessResult r;
  std::string how;
  if (widths.empty()) {
    // --abort: stop at the first failure, which is all this needs to know. (Not under MPI: one
    // rank stopping early would leave the others waiting.)
    std::vector<std::string> abort_early = command;
    abort_early.push_back("--abort");
    r = run_process(abort_early, o);
    how = r.describe();
  } else {
    for (int w : widths) {
      r = run_mpi(w, logs, command, o).process;
      how = r.describe() + " at W=" + std::to_string(w);
      if (!r.exited(0)) break;
    }
  }
  if (r.exited(77)) {
    table.add(what + " fails its tests", "skip", "its [cpu] cases pass; the [gpu] cases that would catch it need a GPU");
  } else if (r.exited(0)) {
    table.add(what + " fails its tests", "fail", "every test passed: the tests do not notice this change");
  } else {
    table.add(what + " fails its tests", "pass", how);
  }
}

/// Builds a planted submission from the reference and one textual change, grades it, and checks
/// it was caught for the expected reason.
void check_planted(const Paths& paths, const Lab& lab, const nlohmann::json& spec, bool gpu, Table& table) {
  const std::string name = "lab " + lab.number + " planted: " + spec.value("name", "?");
  const bool needs_gpu = spec.value("needs_gpu", false);
  if (needs_gpu && !gpu) {
    table.add(name, "skip", "needs a GPU");
    return;
  }
  const fs::path dir = paths.build / "planted" / lab.number / content_hash(spec.dump());
  fs::remove_all(dir);
  fs::create_directories(dir);
  // "changes": [{"replace": ..., "with": ...}, ...] or a single "replace"/"with" pair, in "file".
  nlohmann::json changes = spec.value("changes", nlohmann::json::array());
  if (spec.contains("replace")) changes.push_back({{"replace", spec["replace"]}, {"with", spec["with"]}});
  for (const std::string& f : lab.files) {
    std::string text = read_text(lab.solutions / f);
    if (f == spec.value("file", "")) {
      for (const auto& change : changes) {
        const std::string from = change["replace"], to = change["with"];
        const std::size_t at = text.find(from);
        if (at == std::string::npos) {
          table.add(name, "fail", "the text to replace is no longer in solutions/" + lab.slug + "/" + f + ": update planted.json");
          return;
        }
        text.replace(at, from.size(), to);
      }
    }
    write_text(dir / f, text);
  }
  const auto before = hash_tree(dir);
  GradeOptions g;
  g.lab = lab.number;
  g.submission = dir.string();
  g.quiet = true;
  g.seed = 12345;
  g.rounds = 1;
  g.max_rounds = 3;
  g.perf_time_cap_s = 60;
  g.timeout_s = spec.value("timeout_s", 0.0);
  g.sanitize = spec.value("sanitize", false);
  // Distributed labs: one width is enough to catch a plant (default: a W that is not a power of
  // two, the case most likely to expose chunk arithmetic), which keeps CI short.
  g.ranks = spec.value("ranks", std::vector<int>{3});
  // Only the cases that matter for this plant (keeps the GPU run short): "cases" if given,
  // else the expected failing case when it is a test case; build-step plants stop before tests.
  if (spec.contains("cases")) {
    g.cases = spec["cases"].get<std::vector<std::string>>();
  } else {
    const std::string failed = spec.value("expect_failed", "");
    if (!failed.empty() && failed != "compile" && failed != "link with the tests" &&
        failed != "no forbidden library calls") {
      g.cases = {failed};
    }
  }
  std::cout << "selftest: grading planted submission \"" << spec.value("name", "?") << "\"\n";
  const GradeResult r = grade(paths, g);
  std::string problem;
  // "expect_exit": a code, or a list of acceptable codes ([0, 2]: nothing failed).
  std::vector<int> want_exit;
  if (spec.contains("expect_exit") && spec["expect_exit"].is_array()) {
    want_exit = spec["expect_exit"].get<std::vector<int>>();
  } else {
    want_exit = {spec.value("expect_exit", 1)};
  }
  if (std::find(want_exit.begin(), want_exit.end(), r.exit_code) == want_exit.end()) {
    problem = "exit " + std::to_string(r.exit_code) + ", expected " + nlohmann::json(want_exit).dump();
  }
  const std::string want_failed = spec.value("expect_failed", "");
  const std::string want_detail = spec.value("expect_detail", "");
  bool found = want_failed.empty();
  for (const Check& c : r.checks) {
    // Distributed cases are named "<case> (W=<width>)".
    const bool same_case = c.name == want_failed || c.name.rfind(want_failed + " (W=", 0) == 0;
    if (!same_case || c.status != "fail") continue;
    std::string all;
    for (const auto& d : c.details) all += d + "\n";
    found = found || want_detail.empty() || all.find(want_detail) != std::string::npos;
  }
  if (problem.empty() && !found) problem = "check \"" + want_failed + "\" did not fail" + (want_detail.empty() ? "" : " with \"" + want_detail + "\"");
  // "expect_passed": cases that must still pass (e.g. "the values are right, only the traffic
  // is wrong"): proves the failure came from the check meant to catch it.
  const auto must_pass = spec.value("expect_passed", std::vector<std::string>{});
  for (const std::string& want_pass : must_pass) {
    for (const Check& c : r.checks) {
      const bool same_case = c.name == want_pass || c.name.rfind(want_pass + " (W=", 0) == 0;
      if (problem.empty() && same_case && c.status != "pass") problem = "\"" + c.name + "\" should pass but did not";
    }
  }
  if (problem.empty() && hash_tree(dir) != before) problem = "grading changed the submission's files";
  if (problem.empty() && spec.value("expect_no_leftovers", false)) {
    // run_mpi kills and reports survivors; either finding is a failure here.
    const nlohmann::json info = load_labinfo(paths, lab.number);
    const std::string exe = info["variants"]["sub"]["exe"];
    for (const Check& c : r.checks) {
      for (const auto& d : c.details) {
        if (d.find("still running afterwards") != std::string::npos) problem = "processes were left behind: " + d;
      }
    }
    if (problem.empty() && !processes_running(exe).empty()) problem = "processes of " + exe + " are still running";
  }
  table.add(name, problem.empty() ? "pass" : "fail",
            !problem.empty() ? problem : want_failed.empty() ? "graded as expected: exit " + std::to_string(r.exit_code)
                                                             : "caught: " + want_failed);
}

}  // namespace

int selftest(const Paths& paths, const SelftestOptions& options) {
  Table table;
  const bool gpu = gpu_visible();
  std::cout << "selftest: " << (gpu ? "a GPU is visible: GPU cases run" : "no GPU visible: GPU cases are skipped, never passed") << "\n";
  if (options.build) {
    BuildResult b = build_targets(paths, {}, /*echo=*/true);
    if (b.ok) b = build_targets(paths, {"gpulab_variants"}, /*echo=*/true);
    table.add("build (everything, skeletons and mutants included)", b.ok ? "pass" : "fail",
              b.ok ? "" : b.diagnostics.substr(0, 2000));
    if (!b.ok) return table.print();
  }
  run_ctest(paths, "", table);

  std::vector<Lab> labs = discover_labs(paths);
  if (!options.lab.empty()) {
    const auto one = find_lab(paths, options.lab);
    labs = one ? std::vector<Lab>{*one} : std::vector<Lab>{};
  }
  for (const Lab& lab : labs) {
    const auto gaps = lesson_gaps(lab);
    table.add("lab " + lab.number + " lesson has a section per TODO", gaps.empty() ? "pass" : "fail",
              gaps.empty() ? "" : gaps.front());
    const nlohmann::json info = load_labinfo(paths, lab.number);
    if (info.is_null() || !info.value("buildable", false)) {
      table.add("lab " + lab.number, "skip", info.is_null() ? "not configured" : info.value("reason", ""));
      continue;
    }
    const fs::path logs = paths.build / "selftest" / ("mpi-" + lab.number);
    expect_failure("lab " + lab.number + " skeleton", info["variants"]["skeleton"]["exe"], info, logs, table);
    for (const auto& region : info["regions"]) {
      const std::string id = region.get<std::string>();
      expect_failure("lab " + lab.number + " mutant " + id, info["mutants"][id]["exe"], info, logs, table);
    }
    GradeOptions g;
    g.lab = lab.number;
    g.solutions = true;
    g.quiet = true;
    g.seed = 12345;
    g.json_path = (paths.build / "selftest" / ("grade-" + lab.number + "-solutions.json")).string();
    g.max_rounds = 5;
    g.perf_time_cap_s = 90;
    std::cout << "selftest: grading the reference of lab " << lab.number << "\n";
    const GradeResult r = grade(paths, g);
    // Exit 2: nothing failed, some checks could not run on this machine — without a GPU, the
    // [gpu] ones; with one, those the hardware cannot serve (NCCL needs a GPU per rank, the
    // 2^31-element case 25 GiB). They are listed, never counted as passed.
    std::set<std::string> reasons;
    for (const Check& c : r.checks) {
      if (c.status == "not-run" && !c.details.empty()) reasons.insert(c.details.front());
    }
    std::string detail = "exit " + std::to_string(r.exit_code);
    if (r.exit_code == 2) {
      detail = std::to_string(reasons.size()) + " kind(s) of check could not run here";
      for (const auto& why : reasons) detail += "; " + why;
    }
    table.add("lab " + lab.number + " reference graded", r.exit_code == 0 || r.exit_code == 2 ? "pass" : "fail", detail);
    const fs::path planted = lab.tests / "planted.json";
    if (fs::exists(planted)) {
      for (const auto& spec : nlohmann::json::parse(read_text(planted))) {
        if (options.gpu_plants_only && !spec.value("needs_gpu", false)) {
          table.add("lab " + lab.number + " planted: " + spec.value("name", "?"), "skip", "--gpu-plants-only (CI grades it)");
          continue;
        }
        check_planted(paths, lab, spec, gpu, table);
      }
    }
  }

  const std::vector<Lab> all = discover_labs(paths);
  const auto changed = learner_changes(paths, all);
  if (!changed.empty()) {
    table.add("sync --check", "skip", "labs/ holds your own work (" + changed.front() + "); skeletons were checked from solutions/ instead");
  } else {
    const SyncReport s = sync_labs(paths, all, /*check=*/true, /*force=*/false);
    table.add("sync --check", s.drift.empty() ? "pass" : "fail", s.drift.empty() ? "" : s.drift.front());
  }
  return table.print();
}

}  // namespace gpulab::cli
