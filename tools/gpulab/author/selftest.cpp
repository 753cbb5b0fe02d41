/// @file selftest.cpp
/// @brief The project's own test run (see selftest.hpp).
#include "author/selftest.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <set>

#include "author/junit.hpp"
#include "author/plants.hpp"
#include "author/selftest_class.hpp"
#include "author/selftest_table.hpp"
#include "author/sync.hpp"
#include "base/lab_config.hpp"
#include "base/process.hpp"
#include "grade/build.hpp"
#include "grade/grade.hpp"
#include "grade/grade_stages.hpp"
#include "run/mpi.hpp"

namespace gpulab::cli {
namespace {

/// CTest over the unit tests (the labs' reference cases run once, in `grade --solutions`), @p jobs
/// at a time.
/// Which unit tests a run_unit_tests call runs: all, all but the [cluster] ones (they start
/// daemons and nested grades: beside a lab's timing gates they are load the gates should not
/// have to bear), or only those, alone after the labs.
enum class UnitScope { kAll, kWithoutCluster, kClusterOnly };

void run_unit_tests(const Paths& paths, bool gpu, Table& table, int jobs, UnitScope scope = UnitScope::kAll) {
  const bool cluster_only = scope == UnitScope::kClusterOnly;
  const std::string row = cluster_only ? "unit tests: the [cluster] cases, alone after the labs (ctest)" : "unit tests (ctest)";
  const fs::path junit = paths.build / "selftest" / (cluster_only ? "unit-tests-cluster.xml" : "unit-tests.xml");
  fs::create_directories(junit.parent_path());
  fs::remove(junit);
  ProcessOptions o;
  o.timeout_s = 3600;
  o.echo = true;
  std::vector<std::string> argv = {"ctest", "--test-dir", paths.build.string(), "-j", std::to_string(jobs), "-L", "^unit$",
                                   "--output-on-failure", "--output-junit", junit.string()};
  if (scope == UnitScope::kWithoutCluster) argv.insert(argv.end(), {"-LE", "^cluster$"});
  if (cluster_only) argv.insert(argv.end(), {"-L", "^cluster$"});
  argv.push_back(cluster_only ? "--no-tests=ignore" : "--no-tests=error");
  const ProcessResult r = run_process(argv, o);
  std::vector<JunitCase> cases;
  try {
    cases = parse_junit(read_text(junit));
  } catch (const std::exception& e) {
    table.add(row, "fail", r.describe() + "; no results: " + e.what());
    return;
  }
  int passed = 0, failed = 0, skipped = 0;
  std::vector<std::string> gpu_passed;
  for (const JunitCase& c : cases) {
    passed += c.passed();
    failed += c.failed;
    skipped += c.skipped && !c.failed;
  }
  table.add(row, r.exited(0) && failed == 0 ? "pass" : "fail",
            std::to_string(passed) + " passed, " + std::to_string(failed) + " failed, " + std::to_string(skipped) + " skipped");
  if (cluster_only) return;
  // The [gpu] unit cases, by CTest label: with a GPU every one must run; without, none may pass.
  const ProcessResult listed = run_process({"ctest", "--test-dir", paths.build.string(), "-N", "-L", "^unit$", "-L", "^gpu$",
                                            "--show-only=json-v1"}, {});
  std::set<std::string> gpu_names;
  const nlohmann::json shown = nlohmann::json::parse(listed.output, nullptr, false);
  if (shown.is_object()) {
    for (const auto& t : shown.value("tests", nlohmann::json::array())) gpu_names.insert(t.value("name", ""));
  }
  int gpu_skipped = 0;
  for (const JunitCase& c : cases) {
    if (!gpu_names.count(c.name)) continue;
    gpu_skipped += c.skipped;
    if (c.passed()) gpu_passed.push_back(c.name);
  }
  if (gpu) {
    table.add("unit tests: every [gpu] case ran on the visible GPU", gpu_skipped == 0 ? "pass" : "fail",
              std::to_string(gpu_skipped) + " of " + std::to_string(gpu_names.size()) + " skipped");
  } else {
    table.add("unit tests: no [gpu] case passes without a GPU", gpu_passed.empty() && !gpu_names.empty() ? "pass" : "fail",
              gpu_passed.empty() ? std::to_string(gpu_names.size()) + " [gpu] cases, none reported passed" : "reported passed: " + gpu_passed.front());
  }
}

void grade_reference(const Paths& paths, const LabConfig& lab, Table& table) {
  GradeOptions g;
  g.lab = lab.number;
  g.solutions = true;
  g.quiet = true;
  g.seed = 12345;
  g.json_path = (paths.build / "selftest" / ("grade-" + lab.number + "-solutions.json")).string();
  // Three rounds, as for the plants: the reference is judged against its own yardstick, far from
  // its gate; more rounds only refine figures BENCHMARKS.md takes from a real grade, and cost the
  // distributed labs' lane (the longer of the two) about 20 s.
  g.max_rounds = 3;
  g.perf_time_cap_s = 90;
  std::cout << "selftest: grading the reference of lab " << lab.number << "\n";
  const GradeResult r = grade(paths, g);
  // Exit 2: nothing failed, some checks could not run on this machine. They are listed, never
  // counted as passed.
  std::set<std::string> reasons;
  for (const Check& c : r.checks()) {
    if ((c.status == Status::kNotRun || c.status == Status::kEmuNotRun) && !c.details.empty()) reasons.insert(c.details.front());
  }
  const Counts n = r.card.counts();
  std::string detail = std::to_string(n.passed) + " passed" + (n.emulated_ok > 0 ? ", " + std::to_string(n.emulated_ok) + " ok on the emulator" : "");
  // What failed, by name and first detail: the row is all a CI log may show of it.
  std::string failed;
  int failures = 0;
  for (const Check& c : r.checks()) {
    if (c.status != Status::kFail && c.status != Status::kEmuFail) continue;
    const std::string why = c.details.empty() ? "" : utf8_prefix(c.details.front(), 240);
    if (++failures <= 3) failed += (failed.empty() ? "" : "; ") + c.name + (why.empty() ? "" : " (" + why + ")");
  }
  if (failures > 0) detail = std::to_string(failures) + " failed: " + failed + (failures > 3 ? "; …" : "") + "; " + detail;
  for (const auto& why : reasons) detail += "; N/A: " + why;
  table.add("lab " + lab.number + " reference graded", r.exit_code == 0 || r.exit_code == 2 ? "pass" : "fail",
            "exit " + std::to_string(r.exit_code) + ": " + detail);
}

/// Grades the plant again in a process group of its own, sends SIGINT to that group once the
/// submission's processes run (as Ctrl-C in a terminal would), and checks that the grader exits
/// 130 and that no process of the submission survives. "" or what went wrong.
std::string interrupted_grade_leaves_nothing(const Paths& paths, const LabConfig& lab, const Plant& plant, const fs::path& dir) {
  const Variant* sub = lab.build.variant("sub");
  if (sub == nullptr) return "no submission build";
  const pid_t grader = fork();
  if (grader == 0) {
    setpgid(0, 0);
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, STDOUT_FILENO);
    dup2(devnull, STDERR_FILENO);
    const std::string cli = (paths.build / "bin" / "gpulab-cli").string(), ranks = std::to_string(plant.ranks.empty() ? 3 : plant.ranks.front());
    execl(cli.c_str(), cli.c_str(), "grade", lab.number.c_str(), "--submission", dir.c_str(), "--ranks", ranks.c_str(), "--quiet",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(grader, grader);
  bool started = false;
  for (int k = 0; k < 600 && !started; ++k) {  // up to a minute for the build and the first case
    started = !processes_running(sub->exe).empty();
    usleep(100000);
  }
  usleep(500000);
  kill(-grader, SIGINT);
  int status = 0;
  waitpid(grader, &status, 0);
  usleep(200000);
  const std::vector<int> left = processes_running(sub->exe);
  for (int pid : left) kill(pid, SIGKILL);
  if (!started) return "the submission's processes never started";
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 130) return "after Ctrl-C the grader ended with status " + std::to_string(status) + ", not exit 130";
  if (!left.empty()) return std::to_string(left.size()) + " process(es) of the submission were still running after Ctrl-C";
  return "";
}

void check_plant(const Paths& paths, const LabConfig& lab, const Plant& plant, bool gpu, Table& table) {
  const std::string row = "lab " + lab.number + " planted: " + plant.name;
  if (plant.needs_gpu && !gpu && !plant.has_without_gpu) {
    table.add(row, "skip", "needs a GPU");
    return;
  }
  if (plant.needs_root && !sandbox_available()) {
    table.add(row, "skip", "needs the grader's sandbox: " + sandbox_missing());
    return;
  }
  const fs::path dir = paths.build / "planted" / lab.number / fs::path(plant.patch).stem();
  if (const std::string problem = apply_plant(lab, plant, dir); !problem.empty()) {
    table.add(row, "fail", problem);
    return;
  }
  const TreeHashes before = hash_tree(dir);
  std::cout << "selftest: grading planted submission \"" << plant.name << "\"\n";
  // A loaded machine, made here: processes that only spin, stopped once the grade is done.
  struct BusyProcesses {
    std::vector<pid_t> pids;
    explicit BusyProcesses(int n) {
      for (int k = 0; k < n; ++k) {
        const pid_t pid = fork();
        if (pid == 0) {
          for (volatile unsigned long spin = 0;; spin = spin + 1) {
          }
        }
        if (pid > 0) pids.push_back(pid);
      }
    }
    void stop() {
      for (pid_t pid : pids) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
      pids.clear();
    }
    ~BusyProcesses() { stop(); }
  } busy(plant.busy_processes);
  const auto t0 = std::chrono::steady_clock::now();
  const GradeResult r = grade(paths, plant_grade_options(lab, plant, dir));
  busy.stop();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Plant::Expect& expect = gpu || !plant.has_without_gpu ? plant.expect : plant.without_gpu;
  std::string problem = plant_verdict(plant, expect, r);
  if (problem.empty() && plant.max_seconds > 0 && seconds > plant.max_seconds) {
    problem = "the grade took " + std::to_string(static_cast<int>(seconds)) + " s, more than " + std::to_string(static_cast<int>(plant.max_seconds)) + " s";
  }
  if (problem.empty() && hash_tree(dir) != before) problem = "grading changed the submission's files";
  if (problem.empty() && plant.no_leftovers) {
    for (const Check& c : r.checks()) {
      for (const auto& d : c.details) {
        if (d.find("still running afterwards") != std::string::npos) problem = "processes were left behind: " + d;
      }
    }
    const Variant* sub = lab.build.variant("sub");
    if (problem.empty() && sub != nullptr && !processes_running(sub->exe).empty()) problem = "processes of " + sub->exe + " are still running";
  }
  if (problem.empty() && plant.interrupt) problem = interrupted_grade_leaves_nothing(paths, lab, plant, dir);
  const std::string where = (gpu || !plant.has_without_gpu ? "" : " (on the CPU emulator)") +
                            (plant.busy_processes > 0 ? " beside " + std::to_string(plant.busy_processes) + " busy processes" : "") +
                            (plant.max_seconds > 0 ? " in " + std::to_string(static_cast<int>(seconds)) + " s" : "") +
                            (plant.interrupt ? "; Ctrl-C during it left no process" : "");
  table.add(row, problem.empty() ? "pass" : "fail",
            !problem.empty() ? problem : expect.failed.empty() ? "graded as expected: exit " + std::to_string(r.exit_code) + where
                                                               : "caught: " + expect.failed + where);
}

/// The grade's symbol stage on the skeleton and on every mutant (and their emulator builds): code
/// the learner has not touched, or the reference with one region stubbed, must keep the rules —
/// the rules judge the learner's code, not what the compiler emits around it.
void check_variants_keep_symbol_rules(const Paths& paths, const LabConfig& lab, Table& table) {
  const BuildInfo& b = lab.build;
  std::vector<std::pair<std::string, const Variant*>> native, emulated;
  native.emplace_back("skeleton", b.variant("skeleton"));
  emulated.emplace_back("skeleton (emulator build)", b.variant("emu_skeleton"));
  for (const auto& [id, v] : b.mutants) native.emplace_back("mutant " + id, &v);
  for (const auto& [id, v] : b.emu_mutants) emulated.emplace_back("mutant " + id + " (emulator build)", &v);
  std::string first;
  int judged = 0;
  // The yardsticks first: the emulator's reference is built only when a grade needs it.
  std::vector<std::string> references;
  for (const Variant* r : {b.variant("ref"), b.variant("emu_ref")}) {
    if (r != nullptr) references.push_back(r->target);
  }
  if (!references.empty() && !build_targets(paths, references).ok) first = "the reference builds did not build";
  for (const auto& [variants, reference] : {std::pair{&native, b.variant("ref")}, std::pair{&emulated, b.variant("emu_ref")}}) {
    if (reference == nullptr) continue;
    for (const std::string& obj : reference->objects) {
      if (!fs::exists(obj) && first.empty()) first = "the reference's " + obj + " was not built";
    }
    for (const auto& [what, v] : *variants) {
      if (v == nullptr) continue;
      for (const std::string& obj : v->objects) {
        if (!fs::exists(obj) && first.empty()) first = what + ": " + obj + " was not built (selftest without --no-build builds it)";
      }
      ++judged;
      const std::set<std::string> problems = symbol_problems(lab.number, *v, *reference, paths.build / "variants" / v->target);
      if (!problems.empty() && first.empty()) first = what + ": your code " + *problems.begin();
    }
  }
  table.add("lab " + lab.number + " skeleton and mutants keep the symbol rules", first.empty() ? "pass" : "fail",
            first.empty() ? std::to_string(judged) + " builds judged as a submission would be" : first);
}

void check_lab(const Paths& paths, const LabConfig& lab, const SelftestOptions& options, bool gpu, Table& table) {
  const auto gaps = lesson_gaps(lab);
  table.add("lab " + lab.number + " lesson has a section per TODO", gaps.empty() ? "pass" : "fail", gaps.empty() ? "" : gaps.front());
  std::vector<Plant> plants;
  try {
    plants = load_plants(lab);
  } catch (const std::exception& e) {
    table.add("lab " + lab.number + " plants", "fail", e.what());
  }
  if (!lab.build.configured || !lab.build.buildable) {
    table.add("lab " + lab.number, "skip", lab.build.configured ? lab.build.reason : "not configured");
    return;
  }
  check_variants_fail(paths, lab, gpu, table);
  check_variants_keep_symbol_rules(paths, lab, table);
  grade_reference(paths, lab, table);
  for (const Plant& plant : plants) {
    if (options.gpu_plants_only && !plant.needs_gpu) {
      table.add("lab " + lab.number + " planted: " + plant.name, "skip", "--gpu-plants-only (CI grades it)");
      continue;
    }
    check_plant(paths, lab, plant, gpu, table);
  }
}

/// Seconds each lab took in the last selftest of this build tree (build/selftest/selftest.json),
/// for the order of the pool below; empty where there was none (a clean clone).
std::map<std::string, double> last_seconds_by_lab(const fs::path& json_file) {
  std::map<std::string, double> seconds;
  try {
    if (!fs::exists(json_file)) return seconds;
    const nlohmann::json last = nlohmann::json::parse(read_text(json_file));
    for (const auto& r : last.value("rows", nlohmann::json::array())) {
      const std::string step = r.value("step", "");
      if (step.rfind("lab ", 0) == 0) seconds[step.substr(4, step.find(' ', 4) - 4)] += r.value("seconds", 0.0);
    }
  } catch (const std::exception&) {
    seconds.clear();  // an unreadable file only costs the order
  }
  return seconds;
}

/// The labs side by side: a pool of @p jobs workers, each lab graded in a process of its own, the
/// longest first (by the last run's seconds; on a clean clone the distributed labs, then by their
/// number of plants), and never two distributed labs at once (each runs up to 4 ranks on these 2
/// cores). The unit tests, with @p unit_tests, are the first job of the lane beside the distributed
/// labs, one test at a time: the distributed labs, one after another, are the longer lane, and
/// the unit tests before both lanes lengthened it by their whole time. One after another, the labs left a core idle most of the time (a grade waits on a
/// compiler, a time limit or sleeping ranks); side by side, the timing gates run beside another
/// lab's load, which they must bear anyway (every gate is judged against a yardstick measured
/// beside it; scripts/load-check). Builds are serialized by the build tree's lock (build.hpp).
/// Each lab's output goes to build/selftest/lab-NN.log; its rows are printed here as they come,
/// and the whole log of a lab with a failure at the end.
void check_labs_side_by_side(const Paths& paths, const std::vector<LabConfig>& labs, const SelftestOptions& options, bool gpu, bool unit_tests,
                             Table& table) {
  const fs::path dir = paths.build / "selftest";
  const std::map<std::string, double> last = last_seconds_by_lab(dir / "selftest.json");
  std::vector<const LabConfig*> waiting;
  for (const LabConfig& lab : labs) waiting.push_back(&lab);
  auto estimate = [&](const LabConfig* lab) {
    const auto it = last.find(lab->number);
    if (it != last.end()) return it->second;
    double plants = 0;
    try {
      plants = static_cast<double>(load_plants(*lab).size());
    } catch (const std::exception&) {
      // check_lab reports it
    }
    return (lab->distributed() ? 1000.0 : 0.0) + plants;
  };
  std::stable_sort(waiting.begin(), waiting.end(), [&](const LabConfig* a, const LabConfig* b) { return estimate(a) > estimate(b); });
  if (unit_tests) waiting.insert(waiting.begin(), nullptr);  // nullptr: the unit tests, first beside the first distributed lab
  std::cout << "selftest: the labs in " << options.jobs << " workers, longest first:";
  for (const LabConfig* lab : waiting) std::cout << " " << (lab == nullptr ? "unit-tests" : lab->number);
  std::cout << " (each lab's whole output: build/selftest/lab-NN.log)" << std::endl;

  struct Worker {
    const LabConfig* lab = nullptr;
    pid_t pid = -1;
    fs::path log, rows;
    std::size_t shown = 0;  // bytes of the log already scanned
    bool done = false;
    int status = 0;
  };
  std::vector<Worker> workers;
  auto start = [&](const LabConfig* lab) {
    Worker w;
    w.lab = lab;
    const std::string name = lab == nullptr ? "unit-tests" : "lab-" + lab->number;
    w.log = dir / (name + ".log");
    w.rows = dir / (name + ".json");
    fs::create_directories(dir);
    fs::remove(w.rows);
    std::fflush(stdout);
    w.pid = fork();
    if (w.pid == 0) {
      const int fd = open(w.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
      }
      int code = 0;
      try {
        Table own(dir / (name + "-table.json"));
        if (lab == nullptr) {
          run_unit_tests(paths, gpu, own, 1, UnitScope::kWithoutCluster);
        } else {
          check_lab(paths, *lab, options, gpu, own);
        }
        write_text(w.rows, own.rows_json().dump(2) + "\n");
      } catch (const std::exception& e) {
        std::cout << "selftest: " << (lab == nullptr ? std::string("the unit tests") : "lab " + lab->number) << " stopped: " << e.what() << std::endl;
        code = 1;
      }
      std::cout.flush();
      std::fflush(nullptr);
      _exit(code);
    }
    workers.push_back(w);
  };
  // The rows as they come (each log scanned for "selftest: " lines).
  auto show_new_lines = [](Worker& w) {
    std::string text;
    try {
      text = fs::exists(w.log) ? read_text(w.log) : "";
    } catch (const std::exception&) {
      return;
    }
    for (std::size_t end = text.find('\n', w.shown); end != std::string::npos; end = text.find('\n', w.shown)) {
      const std::string line = text.substr(w.shown, end - w.shown);
      w.shown = end + 1;
      if (line.rfind("selftest: PASS", 0) == 0 || line.rfind("selftest: FAIL", 0) == 0 || line.rfind("selftest: SKIP", 0) == 0) {
        std::cout << line << '\n';
      }
    }
    std::cout.flush();
  };
  for (;;) {
    int running = 0;
    bool distributed_running = false;
    for (Worker& w : workers) {
      if (!w.done && waitpid(w.pid, &w.status, WNOHANG) == w.pid) w.done = true;
      show_new_lines(w);
      if (!w.done) {
        ++running;
        distributed_running = distributed_running || (w.lab != nullptr && w.lab->distributed());
      }
    }
    while (running < options.jobs) {
      const auto next = std::find_if(waiting.begin(), waiting.end(),
                                     [&](const LabConfig* lab) { return lab == nullptr || !(lab->distributed() && distributed_running); });
      if (next == waiting.end()) break;
      distributed_running = distributed_running || (*next != nullptr && (*next)->distributed());
      start(*next);
      waiting.erase(next);
      ++running;
    }
    if (running == 0 && waiting.empty()) break;
    usleep(300000);
  }
  std::vector<nlohmann::json> rows;
  for (Worker& w : workers) {
    nlohmann::json got = fs::exists(w.rows) ? nlohmann::json::parse(read_text(w.rows), nullptr, false) : nlohmann::json();
    const bool failed_row = got.is_array() && std::any_of(got.begin(), got.end(), [](const nlohmann::json& r) { return r.value("status", "") == "fail"; });
    if (!got.is_array()) {
      got = nlohmann::json::array({{{"step", (w.lab == nullptr ? std::string("the unit tests") : "lab " + w.lab->number) + " run in a process of its own"}, {"status", "fail"},
                                    {"detail", "ended without its rows (exit status " + std::to_string(w.status) + "); see " + w.log.string()}}});
    }
    if (failed_row || !fs::exists(w.rows)) {
      std::cout << "\n---------------- " << w.log.string() << " (a lab with a failure: its whole output) ----------------\n"
                << read_text(w.log) << std::endl;
    }
    for (const auto& r : got) rows.push_back(r);
  }
  // In lab order, as one process would have printed them.
  std::stable_sort(rows.begin(), rows.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a.value("step", "").substr(0, 6) < b.value("step", "").substr(0, 6);
  });
  table.append(rows);
}

}  // namespace

int selftest(const Paths& paths, const SelftestOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  Table table(paths.build / "selftest" / "selftest.json");
  const bool gpu = gpu_visible();
  std::cout << "selftest: " << (gpu ? "a GPU is visible: GPU cases run" : "no GPU visible: GPU cases are skipped or emulated, never passed") << "\n";
  if (options.build) {
    BuildResult b = build_targets(paths, {}, /*echo=*/true);
    if (b.ok) b = build_targets(paths, {"gpulab_variants", "gpulab_emu_variants"}, /*echo=*/true);
    table.add("build (everything, skeletons and mutants included)", b.ok ? "pass" : "fail", b.ok ? "" : b.diagnostics.substr(0, 2000));
    if (!b.ok) return table.finish();
  }
  if (options.class_only) {
    check_class(paths, /*full=*/true, table);
    return table.finish();
  }
  std::vector<LabConfig> labs;
  try {
    labs = discover_labs(paths);
    table.add("every lab.json loads", "pass", std::to_string(labs.size()) + " labs");
  } catch (const std::exception& e) {
    table.add("every lab.json loads", "fail", e.what());
    run_unit_tests(paths, gpu, table, build_jobs());
    return table.finish();
  }
  std::vector<LabConfig> chosen;
  for (const LabConfig& lab : labs) {
    if (options.lab.empty() || lab.number == options.lab || lab.slug == options.lab || "0" + options.lab == lab.number) chosen.push_back(lab);
  }
  bool side_by_side = options.jobs > 1 && chosen.size() > 1;
  if (side_by_side) {
    check_labs_side_by_side(paths, chosen, options, gpu, /*unit_tests=*/true, table);
    run_unit_tests(paths, gpu, table, 1, UnitScope::kClusterOnly);
  } else {
    run_unit_tests(paths, gpu, table, build_jobs());
    for (const LabConfig& lab : chosen) check_lab(paths, lab, options, gpu, table);
  }
  const bool with_lab06 = std::any_of(chosen.begin(), chosen.end(), [](const LabConfig& l) { return l.number == "06"; });
  if (with_lab06 && !options.gpu_plants_only) check_class(paths, /*full=*/false, table);
  const auto changed = learner_changes(paths, labs);
  if (!changed.empty()) {
    table.add("sync --check", "skip", "labs/ holds your own work (" + changed.front() + "); skeletons were checked from solutions/ instead");
  } else {
    const SyncReport s = sync_labs(paths, labs, /*check=*/true, /*force=*/false);
    table.add("sync --check", s.drift.empty() ? "pass" : "fail", s.drift.empty() ? "" : s.drift.front());
  }
  if (side_by_side) table.set_wall_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return table.finish();
}

}  // namespace gpulab::cli
