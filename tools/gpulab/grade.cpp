/// @file grade.cpp
/// @brief The autograder (see grade.hpp).
#include "grade.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "build.hpp"
#include "diagnose.hpp"
#include "mpi.hpp"
#include "gpulab/report.hpp"
#include "gpulab/stats.hpp"
#include "process.hpp"
#include "verdict.hpp"

namespace gpulab::cli {
namespace {

struct Style {
  bool color = isatty(STDOUT_FILENO) != 0;
  std::string paint(const std::string& s, const char* code) const {
    return color ? std::string("\033[") + code + "m" + s + "\033[0m" : s;
  }
};

std::string status_word(const Style& st, const std::string& status) {
  if (status == "pass") return st.paint("PASS", "32");
  if (status == "fail") return st.paint("FAIL", "1;31");
  if (status == "info") return st.paint("INFO", "36");
  if (status == "stretch") return st.paint("OPT ", "35");
  return st.paint("N/A ", "33");
}

void print_check(const Check& c, bool quiet) {
  // Quiet runs (selftest) still show failures and every performance figure.
  if (quiet && c.status != "fail" && !(c.kind == "performance" && c.status == "pass")) return;
  const Style st;
  char head[512];
  const std::string where = c.where.empty() ? "     " : "[" + c.where + "]";
  std::snprintf(head, sizeof head, "  %s  %s %-58s %6.1f s", status_word(st, c.status).c_str(),
                where.c_str(), c.name.c_str(), c.seconds);
  std::cout << head << '\n';
  for (const std::string& d : c.details) std::cout << "        " << d << '\n';
  for (const std::string& h : c.hints) std::cout << "        " << st.paint("hint: ", "36") << h << '\n';
  std::cout.flush();
}

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

/// A test case as listed by the executable.
struct Case {
  std::string where;  // cpu / gpu
  std::string name;
  std::string tags;
  bool perf() const { return tags.find("[perf]") != std::string::npos; }
  /// A stretch goal: reported, never counted for or against the grade.
  bool stretch() const { return tags.find("[stretch]") != std::string::npos; }
};

/// "yours = 61 % of this GPU's measured fp32 FMA peak (66 900 GFLOP/s, measured …)", from the
/// peaks a performance record carries (gpulab::testing::peak_fields); "" when it carries none.
std::string peak_line(const nlohmann::json& data, double value, const std::string& who) {
  const std::string unit = data.value("unit", "");
  const bool flops = unit.find("FLOP/s") != std::string::npos;
  const double peak = flops ? data.value("peak_gflops", 0.0) : unit.find("B/s") != std::string::npos ? data.value("peak_gbs", 0.0) : 0.0;
  if (peak <= 0.0 || value <= 0.0) return "";
  char b[240];
  std::snprintf(b, sizeof b, "%s = %.0f %% of this GPU's measured %s (%.0f %s, measured %s)", who.c_str(), 100.0 * value / peak,
                flops ? "fp32 FMA peak" : "copy bandwidth", peak, flops ? "GFLOP/s" : "GB/s",
                data.value("peaks_measured_at", std::string("?")).c_str());
  return b;
}

/// A failed stretch case is shown as such ("OPT") and left out of the result.
void mark_stretch(const Case& c, Check& check) {
  if (!c.stretch()) return;
  if (check.status == "fail") {
    check.status = "stretch";
    check.details.push_back("a stretch goal: not counted in the result");
  } else if (check.status == "pass") {
    check.details.push_back("a stretch goal, reached");
  }
}

std::vector<Case> list_cases(const std::string& exe, std::string& error) {
  ProcessOptions o;
  o.timeout_s = 60;
  const ProcessResult r = run_process({exe, "--gpulab-list"}, o);
  std::vector<Case> cases;
  if (!r.exited(0)) {
    error = r.describe() + ": " + r.output;
    return cases;
  }
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    Case c;
    if (std::getline(fields, c.where, '\t') && std::getline(fields, c.name, '\t') &&
        std::getline(fields, c.tags)) {
      cases.push_back(c);
    }
  }
  return cases;
}

/// The result of one test process (or one mpirun of W ranks).
struct CaseRun {
  ProcessResult process;
  std::vector<nlohmann::json> records;
  std::string skip_reason;
  std::vector<std::string> problems;  ///< launcher findings: a killed rank, an abort, leftovers
};

/// Runs one case: directly, or under mpirun with @p ranks ranks (ranks > 0).
CaseRun run_case(const std::string& exe, const Case& c, const fs::path& log_dir, int index,
                 std::uint64_t seed, double timeout_s, int ranks = 0) {
  const std::string stem = "case-" + std::to_string(index);
  const fs::path report = log_dir / (stem + ".jsonl");
  ProcessOptions o;
  o.timeout_s = timeout_s;
  o.env = {{"GPULAB_REPORT", report.string()}, {"GPULAB_SEED", std::to_string(seed)}};
  const std::vector<std::string> command = {exe, c.name, "--reporter", "compact", "--durations", "no"};
  CaseRun run;
  if (ranks > 0) {
    const MpiRun m = run_mpi(ranks, log_dir / (stem + "-ranks"), command, o);
    run.process = m.process;
    run.problems = m.problems;
    if (!m.leftovers.empty()) run.problems.push_back(std::to_string(m.leftovers.size()) + " process(es) of the program were still running afterwards (now killed)");
    std::string all = m.process.output;
    for (int r = 0; r < ranks; ++r) {
      std::istringstream in(m.rank_output[static_cast<std::size_t>(r)]);
      for (std::string line; std::getline(in, line);) all += "[rank " + std::to_string(r) + "] " + line + "\n";
      const fs::path rank_report = report.string() + ".rank" + std::to_string(r);
      if (fs::exists(rank_report)) {
        for (auto& rec : gpulab::report::read_file(rank_report.string())) run.records.push_back(std::move(rec));
      }
    }
    run.process.output = all;
  } else {
    run.process = run_process(command, o);
    if (fs::exists(report)) run.records = gpulab::report::read_file(report.string());
  }
  write_text(log_dir / (stem + ".log"), run.process.output);
  static const std::regex skipped(R"(gpulab: SKIPPED \d+ \[gpu\] case\(s\): (.*))");
  std::smatch m;
  if (std::regex_search(run.process.output, m, skipped)) run.skip_reason = m[1].str();
  return run;
}

/// Catch2's own words for a failure (assertion text, exception message), for when the test
/// wrote no record (e.g. a CUDA error thrown from the learner's launcher).
std::vector<std::string> catch_failures(const std::string& output) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line) && lines.size() < 4;) {
    if (line.find(": failed:") != std::string::npos || line.find("FAILED") != std::string::npos) {
      const std::size_t msg = line.find("unexpected exception with message:");
      lines.push_back(msg != std::string::npos ? line.substr(msg) : line);
    }
  }
  return lines;
}

Check judge_case(const Case& c, const CaseRun& run, const nlohmann::json& meta, double timeout_s) {
  Check check{c.name, "correctness", c.where, "fail", run.process.seconds, {}, {}, {}};
  const ProcessResult& p = run.process;
  std::set<std::string> hints;
  std::vector<std::string> not_run;
  // Failures by message; in a distributed case, with the ranks that reported each.
  std::vector<std::pair<std::string, std::vector<int>>> failures;
  for (const auto& rec : run.records) {
    if (rec.contains("not_run")) {
      const std::string text = rec.value("summary", "");
      if (std::find(not_run.begin(), not_run.end(), text) == not_run.end()) not_run.push_back(text);
    }
    if (rec.value("ok", true) == false) {
      const std::string text = rec.value("summary", rec.dump());
      auto it = std::find_if(failures.begin(), failures.end(), [&](const auto& f) { return f.first == text; });
      if (it == failures.end()) it = failures.insert(failures.end(), {text, {}});
      if (rec.contains("rank")) it->second.push_back(rec["rank"].get<int>());
      if (rec.contains("hint") && hints.size() < 2) hints.insert(rec["hint"].get<std::string>());
    }
  }
  for (const auto& [text, ranks] : failures) {
    if (check.details.size() >= 5) break;
    std::string who;
    for (int r : ranks) who += (who.empty() ? "" : ",") + std::to_string(r);
    check.details.push_back(ranks.empty() ? text : (ranks.size() > 1 ? "ranks " : "rank ") + who + ": " + text);
  }
  if (p.exited(0) && run.problems.empty()) {
    check.status = not_run.empty() ? "pass" : "not-run";
    check.details = not_run;
    // What a test reports for the learner's information (e.g. a sweep), shown on a pass too.
    for (const auto& rec : run.records) {
      if (rec.value("kind", "") == "info" && rec.value("rank", 0) == 0) check.details.push_back(rec.value("summary", ""));
    }
  } else if (p.exited(77)) {
    check.status = "not-run";
    check.details = {"needs a GPU: " + (run.skip_reason.empty() ? std::string("no CUDA device") : run.skip_reason)};
  } else if (!run.problems.empty()) {
    check.details.insert(check.details.begin(), run.problems.begin(), run.problems.end());
    if (p.timed_out) {
      hints.insert(meta.value("/hints/timeout"_json_pointer, std::string("a rank waits for a message that never comes")));
    } else {
      hints.insert(meta.value("/hints/crash"_json_pointer, std::string("a rank died; the others were stopped")));
    }
  } else if (p.timed_out) {
    check.details.insert(check.details.begin(),
                         "did not finish within " + fixed(timeout_s, 0) + " s; the process was killed");
    hints.insert(meta.value("/hints/timeout"_json_pointer,
                            std::string("a kernel that never exits or a loop whose index never advances")));
  } else if (p.signal != 0 || (p.exit_code != 1 && p.exit_code != 0)) {
    check.details.insert(check.details.begin(), "the test process " + p.describe());
    hints.insert(meta.value("/hints/crash"_json_pointer, std::string("the test process crashed")));
  } else {
    // exit 1: failed checks; add Catch2's own message when no record explains it
    if (check.details.empty()) check.details = catch_failures(p.output);
    for (const std::string& line : catch_failures(p.output)) {
      if (line.rfind("unexpected exception", 0) == 0 && check.details.size() < 6) check.details.push_back(line);
    }
    if (check.details.empty()) check.details.push_back("failed (see the log)");
  }
  check.hints.assign(hints.begin(), hints.end());
  check.data = {{"process", p.describe()}, {"records", run.records}};
  return check;
}

/// Library calls the learner's objects make, and header-only library code they contain.
/// `nm -C` prints "<16 hex digits or spaces> <type> <name>"; type U is a symbol used but defined
/// elsewhere (a call into a library). @p called patterns match those; @p namespaces (e.g.
/// "thrust::") match any symbol, since header-only templates are instantiated in the object.
std::vector<std::string> forbidden_symbols(const std::vector<std::string>& objects,
                                           const std::vector<std::string>& called,
                                           const std::vector<std::string>& namespaces) {
  std::set<std::string> found;
  for (const std::string& obj : objects) {
    ProcessOptions o;
    o.timeout_s = 60;
    const ProcessResult r = run_process({"nm", "-C", obj}, o);
    std::istringstream in(r.output);
    for (std::string line; std::getline(in, line);) {
      if (line.size() <= 19) continue;
      const bool undefined = line[17] == 'U';
      const std::string name = line.substr(19);
      for (const std::string& pat : called) {
        if (undefined && name.find(pat) != std::string::npos) found.insert("a call to " + name);
      }
      for (const std::string& ns : namespaces) {
        const std::size_t at = name.find(ns);
        if (at != std::string::npos && (at == 0 || name[at - 1] == ' ' || name[at - 1] == '<' || name[at - 1] == '(')) {
          found.insert("code from " + ns + " (" + name.substr(0, 80) + (name.size() > 80 ? "...)" : ")"));
          break;
        }
      }
    }
  }
  return {found.begin(), found.end()};
}

}  // namespace

nlohmann::json GradeResult::to_json() const {
  nlohmann::json j = {{"lab", lab}, {"sources", sources}, {"seed", seed}, {"exit_code", exit_code},
                      {"checks", nlohmann::json::array()}};
  int passed = 0, failed = 0, not_run = 0;
  for (const Check& c : checks) {
    j["checks"].push_back({{"name", c.name}, {"kind", c.kind}, {"where", c.where},
                           {"status", c.status}, {"seconds", c.seconds}, {"details", c.details},
                           {"hints", c.hints}, {"data", c.data}});
    passed += c.status == "pass";
    failed += c.status == "fail";
    not_run += c.status == "not-run";
  }
  int stretch = 0;
  for (const Check& c : checks) stretch += c.status == "stretch";
  j["summary"] = {{"passed", passed}, {"failed", failed}, {"not_run", not_run}, {"stretch_not_reached", stretch}};
  if (!not_run_reason.empty()) j["not_run_reason"] = not_run_reason;
  return j;
}

GradeResult grade(const Paths& paths, const GradeOptions& options) {
  GradeResult result;
  const Style st;
  auto finish = [&](GradeResult& r) -> GradeResult {
    int passed = 0, failed = 0, not_run = 0;
    for (const Check& c : r.checks) {
      passed += c.status == "pass";
      failed += c.status == "fail";
      not_run += c.status == "not-run";
    }
    int stretch = 0;
    for (const Check& c : r.checks) stretch += c.status == "stretch";
    r.exit_code = failed > 0 ? 1 : (not_run > 0 ? 2 : 0);
    std::cout << "\n  result: " << passed << " passed, " << failed << " failed, " << not_run
              << " not run here";
    if (stretch > 0) std::cout << ", " << stretch << " stretch goal" << (stretch > 1 ? "s" : "") << " not reached (not counted)";
    if (not_run > 0 && !r.not_run_reason.empty()) std::cout << " (" << r.not_run_reason << ")";
    std::cout << "  →  exit " << r.exit_code << '\n';
    if (failed == 0 && not_run > 0) {
      std::cout << "  The checks marked N/A could not run on this machine; none of them is counted as passed.\n"
                   "  ./gpulab doctor shows what this machine lacks; grade where it is present to complete the grade.\n";
    }
    if (!options.json_path.empty()) write_text(options.json_path, r.to_json().dump(2) + "\n");
    return r;
  };
  auto add = [&](Check c) {
    print_check(c, options.quiet);
    result.checks.push_back(std::move(c));
  };

  const std::optional<Lab> lab = find_lab(paths, options.lab);
  if (!lab) {
    std::cout << "gpulab grade: no lab \"" << options.lab << "\". Labs: ";
    for (const Lab& l : discover_labs(paths)) std::cout << l.number << " ";
    std::cout << "\n";
    result.exit_code = 1;
    return result;
  }
  result.lab = lab->slug;
  result.seed = options.seed ? *options.seed : (static_cast<std::uint64_t>(std::random_device{}()) << 20) ^ std::random_device{}();

  const nlohmann::json info = load_labinfo(paths, lab->number);
  std::cout << "gpulab grade " << lab->number << " · " << lab->title() << '\n';
  if (info.is_null()) {
    std::cout << "  the build tree " << paths.build << " is not configured: run ./gpulab (it configures)\n";
    result.exit_code = 1;
    return result;
  }
  if (!info.value("buildable", false)) {
    result.not_run_reason = info.value("reason", "cannot build here");
    add({"build", "build", "", "not-run", 0, {"lab " + lab->number + " cannot be built here: " + result.not_run_reason},
         {"run ./gpulab doctor to see what is missing"}});
    return finish(result);
  }

  // Which sources.
  std::string variant = "lab";
  fs::path source_dir = lab->labs;
  if (options.solutions) {
    variant = "ref";
    source_dir = lab->solutions;
  } else if (!options.submission.empty()) {
    variant = "sub";
    source_dir = fs::absolute(options.submission);
  }
  result.sources = fs::relative(source_dir, paths.root).string();
  if (result.sources.rfind("..", 0) == 0) result.sources = source_dir.string();
  std::cout << "  sources  " << result.sources
            << (variant == "lab" ? "  (your working copy)" : variant == "ref" ? "  (reference)" : "  (submission)") << '\n'
            << "  seed     " << result.seed << "  (reproduce: ./gpulab grade " << lab->number << " --seed " << result.seed << ")\n";
  const fs::path log_dir = paths.build / "grade" / lab->number;
  fs::remove_all(log_dir);
  fs::create_directories(log_dir);
  std::cout << "  logs     " << fs::relative(log_dir, paths.root).string() << "/\n\n";

  // Protect what is not ours: hash the learner's and the reference's files before and after.
  const auto before_labs = hash_tree(lab->labs), before_solutions = hash_tree(lab->solutions);
  const auto before_submission = variant == "sub" ? hash_tree(source_dir) : decltype(hash_tree(source_dir)){};

  const std::vector<std::string> sources = info["sources"].get<std::vector<std::string>>();
  if (variant == "sub") {
    std::vector<std::string> missing;
    for (const std::string& f : sources) {
      if (!fs::is_regular_file(source_dir / f)) missing.push_back(f);
    }
    if (!fs::is_directory(source_dir) || !missing.empty()) {
      std::string list;
      for (const auto& f : missing) list += " " + f;
      add({"submission files", "build", "", "fail", 0,
           {fs::is_directory(source_dir) ? "missing:" + list : source_dir.string() + " is not a folder"},
           {"a submission folder holds the same file names as labs/" + lab->slug}});
      return finish(result);
    }
    // Snapshot the submission into the build tree; only changed files are rewritten, so an
    // unchanged submission is not recompiled.
    const fs::path snapshot = info["submission_dir"].get<std::string>();
    for (const std::string& f : sources) {
      const std::string text = read_text(source_dir / f);
      if (!fs::exists(snapshot / f) || read_text(snapshot / f) != text) write_text(snapshot / f, text);
    }
  }

  if (!info["variants"].contains(variant)) {
    add({"sources", "build", "", "fail", 0,
         {"labs/" + lab->slug + " is missing files, so the build left this lab's learner targets out"},
         {"restore the folder with `git checkout labs/" + lab->slug + "` (or, instructors, `./gpulab sync`)"}});
    return finish(result);
  }
  const nlohmann::json& v = info["variants"][variant];
  const std::string target = v["target"], exe = v["exe"];
  // Compile the learner's objects first: a forbidden library call is then reported as such,
  // not as the link error it may also cause.
  auto build_step = [&](const std::string& what, const std::string& tgt) {
    const bool tty = isatty(STDOUT_FILENO) != 0;
    if (tty) std::cout << "  building " << tgt << " ..." << std::flush;
    const auto t0 = std::chrono::steady_clock::now();
    const BuildResult b = build_targets(paths, {tgt});
    if (tty) std::cout << "\r" << std::string(60, ' ') << "\r" << std::flush;
    Check c{what, "build", "", b.ok ? "pass" : "fail",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), {}, {}, {}};
    if (!b.ok) {
      std::vector<std::pair<std::string, std::string>> rewrite;
      if (variant == "sub") rewrite.emplace_back(info["submission_dir"].get<std::string>(), source_dir.string());
      std::istringstream diag(extract_diagnostics(b.output, rewrite));
      for (std::string line; std::getline(diag, line);) c.details.push_back(line);
      c.hints.push_back("fix the first error first: later ones often follow from it");
    }
    return c;
  };
  Check compiled = build_step("compile", target + "_src");
  add(compiled);
  if (compiled.status == "fail") return finish(result);

  // Library calls the lab forbids, found in the learner's own object files.
  if (variant != "ref" && lab->meta.contains("forbidden_symbols")) {
    const auto& fb = lab->meta["forbidden_symbols"];
    const auto hits = forbidden_symbols(v["objects"].get<std::vector<std::string>>(),
                                        fb.value("called", std::vector<std::string>{}),
                                        fb.value("namespaces", std::vector<std::string>{}));
    Check c{"no forbidden library calls", "structure", "", hits.empty() ? "pass" : "fail", 0, {}, {}, {}};
    for (const auto& h : hits) {
      if (c.details.size() < 5) c.details.push_back("your code contains " + h);
    }
    if (!hits.empty()) c.hints.push_back(fb.value("why", "this lab asks you to write it yourself"));
    add(c);
  }
  {
    Check linked = build_step("link with the tests", target);
    add(linked);
    if (linked.status == "fail") return finish(result);
  }

  // Diagnosis (informational, not a verdict): each kernel's registers, shared memory and
  // spills from ptxas, the learner's beside the reference's.
  std::vector<KernelResources> ptxas_figures;  // the learner's, kept to cross-check the GPU's own
  {
    const fs::path compiled_dir = variant == "sub" ? fs::path(info["submission_dir"].get<std::string>()) : source_dir;
    std::vector<KernelResources>& mine = ptxas_figures;
    std::vector<KernelResources> reference;
    std::string error;
    for (const std::string& f : sources) {
      if (fs::path(f).extension() != ".cu") continue;
      for (auto& k : kernel_resources(paths.build, compiled_dir / f, error)) mine.push_back(k);
      if (variant != "ref") {
        for (auto& k : kernel_resources(paths.build, lab->solutions / f, error)) reference.push_back(k);
      }
    }
    if (!mine.empty() || !error.empty()) {
      Check c{"resources per kernel (ptxas)", "diagnosis", "", "info", 0, {}, {}, {}};
      if (mine.empty()) {
        c.details.push_back("not available: " + error);
      } else {
        describe_resources(mine, reference, c.details, c.hints);
      }
      if (!options.quiet) print_check(c, false);
      result.checks.push_back(c);
    }
  }

  std::string list_error;
  std::vector<Case> cases = list_cases(exe, list_error);
  if (cases.empty()) {
    add({"list test cases", "build", "", "fail", 0, {list_error.empty() ? "no test cases" : list_error}, {}});
    return finish(result);
  }
  if (!options.cases.empty()) {
    std::vector<Case> chosen;
    for (const std::string& name : options.cases) {
      const auto it = std::find_if(cases.begin(), cases.end(), [&](const Case& c) { return c.name == name; });
      if (it == cases.end()) {
        add({"--case " + name, "build", "", "fail", 0, {"lab " + lab->number + " has no test case of that name"}, {}});
        return finish(result);
      }
      chosen.push_back(*it);
    }
    cases = chosen;
  }
  const double timeout_s = options.timeout_s > 0 ? options.timeout_s : info.value("timeout_s", 120.0);

  int index = 0;
  bool gpu_missing = false;
  std::string skip_reason;
  std::vector<const Case*> perf_cases;
  // Distributed labs: every case under mpirun, once per width W.
  const std::vector<int> widths = !options.ranks.empty() && info.contains("mpi_ranks") && !info["mpi_ranks"].empty()
                                      ? options.ranks
                                      : info.value("mpi_ranks", std::vector<int>{});
  const std::vector<int> perf_widths = !options.ranks.empty() && !widths.empty()
                                           ? std::vector<int>{options.ranks.front()}
                                           : info.value("perf_ranks", std::vector<int>{});
  for (const Case& c : cases) {
    if (c.perf()) {
      perf_cases.push_back(&c);
      continue;
    }
    for (int w : widths.empty() ? std::vector<int>{0} : widths) {
      const CaseRun run = run_case(exe, c, log_dir, index++, result.seed, timeout_s, w);
      if (c.where == "gpu" && run.process.exited(77)) gpu_missing = true;
      if (!run.skip_reason.empty()) skip_reason = run.skip_reason;
      Check check = judge_case(c, run, lab->meta, timeout_s);
      if (w > 0) check.name += " (W=" + std::to_string(w) + ")";
      mark_stretch(c, check);
      add(check);
    }
  }

  // Sanitizer: every [gpu] correctness case again, small, under each compute-sanitizer tool.
  if (options.sanitize) {
    std::string sanitizer;
    for (const char* candidate : {"compute-sanitizer", "/usr/local/cuda/bin/compute-sanitizer"}) {
      if (sanitizer.empty() && run_process({candidate, "--version"}, {}).exited(0)) sanitizer = candidate;
    }
    for (const char* tool : {"memcheck", "racecheck", "synccheck", "initcheck"}) {
      Check check{std::string("sanitizer ") + tool, "sanitizer", "gpu", "pass", 0, {}, {}, {}};
      if (sanitizer.empty()) {
        check.status = "not-run";
        check.details.push_back("compute-sanitizer was not found: it comes with the full CUDA toolkit");
      } else if (gpu_missing) {
        check.status = "not-run";
        check.details.push_back("needs a GPU" + (skip_reason.empty() ? std::string() : ": " + skip_reason));
      } else if (!widths.empty()) {
        check.status = "not-run";
        check.details.push_back("not supported for distributed labs (one sanitizer per rank under mpirun)");
      } else {
        for (const Case& c : cases) {
          if (c.where != "gpu" || c.perf() || c.tags.find("[big]") != std::string::npos) continue;
          ProcessOptions o;
          o.timeout_s = 10 * timeout_s;
          o.env = {{"GPULAB_SMALL", "1"}, {"GPULAB_SEED", std::to_string(result.seed)}};
          const ProcessResult r = run_process({sanitizer, "--tool", tool, "--error-exitcode", "86", "--print-limit", "1",
                                               exe, c.name, "--reporter", "compact"}, o);
          check.seconds += r.seconds;
          write_text(log_dir / ("sanitizer-" + std::string(tool) + "-" + std::to_string(index++) + ".log"), r.output);
          if (r.exited(0)) continue;
          check.status = "fail";
          if (r.exited(86)) {
            // The tool's own report: its "=========" lines, first few.
            std::istringstream in(r.output);
            int kept = 0;
            check.details.push_back(c.name + ":");
            for (std::string line; std::getline(in, line) && kept < 6;) {
              if (line.rfind("========= ", 0) == 0 && line.find("ERROR SUMMARY") == std::string::npos) {
                check.details.push_back("  " + line.substr(10));
                ++kept;
              }
            }
          } else {
            check.details.push_back(c.name + ": " + r.describe() + " under " + tool);
          }
        }
        if (check.status == "fail") {
          check.hints.push_back(std::string(tool) == "racecheck"
                                    ? "two threads touch the same shared-memory word without a __syncthreads() between them"
                                    : std::string(tool) == "memcheck" ? "an access outside an allocation: check every index against its bound"
                                    : std::string(tool) == "synccheck" ? "a __syncthreads() that not every thread of the block reaches"
                                                                       : "memory read before anything was written to it");
        }
      }
      add(check);
    }
  }

  // Performance: measured where a GPU is usable (a [gpu] case that exits 77 says it is not);
  // learner and reference alternate.
  if (!perf_cases.empty()) {
    const nlohmann::json perf_meta = lab->meta.value("performance", nlohmann::json::array());
    const std::string ref_exe = info["variants"]["ref"]["exe"];
    if (variant != "ref") {
      const BuildResult b = build_targets(paths, {info["variants"]["ref"]["target"].get<std::string>()});
      if (!b.ok) {
        add({"build the reference", "build", "", "fail", 0, {b.diagnostics}, {}});
        return finish(result);
      }
    }
    for (const Case* c : perf_cases) {
      nlohmann::json spec = nlohmann::json::object();
      for (const auto& p : perf_meta) {
        if (p.value("case", "") == c->name) spec = p;
      }
      Check check{c->name + (perf_widths.empty() ? std::string() : " (W=" + std::to_string(perf_widths.front()) + ")"),
                  "performance", c->where, "fail", 0, {}, {}, {}};
      if (gpu_missing && c->where == "gpu") {
        check.status = "not-run";
        check.details.push_back("needs a GPU" + (skip_reason.empty() ? std::string() : ": " + skip_reason));
        add(check);
        continue;
      }
      std::map<std::string, std::vector<double>> fraction, value, baseline;
      std::string failure;
      bool skipped = false;
      const std::string ref_side = variant == "ref" ? "learner" : "reference";
      const double need_rel = spec.value("min_fraction_of_reference", 0.0);
      const double need_ref = spec.value("reference_min_fraction_of_baseline", 0.0);
      VerdictRules rules;
      rules.min_rounds = std::max(1, options.rounds);
      rules.max_rounds = std::max(rules.min_rounds, options.max_rounds);
      rules.time_cap_s = options.perf_time_cap_s;
      Verdict verdict;
      const auto perf_start = std::chrono::steady_clock::now();
      for (int round = 0; failure.empty() && !skipped; ++round) {
        for (const char* side_name : {"learner", "reference"}) {
          const std::string side = side_name;
          if (side == "reference" && variant == "ref") continue;
          const CaseRun run = run_case(side == "learner" ? exe : ref_exe, *c, log_dir, index++,
                                       result.seed, 600.0, perf_widths.empty() ? 0 : perf_widths.front());
          check.seconds += run.process.seconds;
          if (run.process.exited(77)) {
            skipped = gpu_missing = true;
            if (!run.skip_reason.empty()) skip_reason = run.skip_reason;
            break;
          }
          if (!run.process.exited(0)) {
            const Check why = judge_case(*c, run, lab->meta, 600.0);
            failure = side + " run " + run.process.describe() +
                      (why.details.empty() ? std::string() : ": " + why.details.front());
            break;
          }
          for (const auto& rec : run.records) {
            // One figure per run: in a distributed case every rank records the same one.
            if (rec.value("kind", "") != "performance" || rec.value("rank", 0) != 0) continue;
            fraction[side].push_back(rec.value("fraction_of_baseline", 0.0));
            value[side].push_back(rec.value("value", 0.0));
            baseline[side].push_back(rec.value("baseline", 0.0));
            if (rec.contains("note")) check.data["note"] = rec["note"];
            if (!rec.value("slowdowns", "").empty()) {
              check.data["slowdowns"] = rec.value("slowdowns", "");
              check.data["sm_clock_mhz"] = rec.value("sm_clock_mhz", 0);
              check.data["temperature_c"] = rec.value("temperature_c", 0);
            }
            for (const char* key : {"flops_per_byte", "peak_gflops", "peak_gbs", "peaks_measured_at"}) {
              if (rec.contains(key)) check.data[key] = rec[key];
            }
            if (rec.contains("rungs")) check.data[side + "_rungs"] = rec["rungs"];
            if (rec.contains("kernels")) check.data[side + "_kernels"] = rec["kernels"];
            check.data["unit"] = rec.value("unit", "");
            check.data["baseline_name"] = rec.value("baseline_name", "");
          }
        }
        if (!failure.empty() || skipped || fraction["learner"].empty()) continue;
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - perf_start).count();
        verdict = variant == "ref" ? decide(fraction["learner"], {}, need_ref, elapsed, rules)
                                   : decide(fraction["learner"], fraction["reference"], need_rel, elapsed, rules);
        if (verdict.decided) break;
      }
      if (skipped) {
        check.status = "not-run";
        check.details.push_back("needs a GPU" + (skip_reason.empty() ? std::string() : ": " + skip_reason));
        add(check);
        continue;
      }
      if (!failure.empty() || fraction["learner"].empty()) {
        check.details.push_back(failure.empty() ? "no measurement recorded" : failure);
        if (variant != "ref") mark_stretch(*c, check);
        add(check);
        continue;
      }
      const std::string unit = check.data.value("unit", "");
      const std::string base_name = check.data.value("baseline_name", "baseline");
      const double learner_frac = median(fraction["learner"]);
      const double ref_frac = median(fraction[ref_side]);
      check.data.update({{"threshold", variant == "ref" ? need_ref : need_rel}, {"variant", variant},
                         {"learner_fraction", learner_frac}, {"reference_fraction", ref_frac},
                         {"learner_value", median(value["learner"])},
                         {"reference_value", median(value[ref_side])},
                         {"baseline_value", median(baseline["learner"])},
                         {"rounds", fraction["learner"].size()}});
      const std::string base_line = base_name + " " + figure(median(baseline["learner"])) + " " + unit;
      const bool ok = verdict.pass;
      if (variant == "ref") {
        check.details.push_back("reference " + figure(median(value["learner"])) + " " + unit + " = " +
                                fixed(100 * learner_frac, 1) + " % of " + base_line +
                                (need_ref > 0 ? "; target ≥ " + fixed(100 * need_ref, 0) + " %"
                                              : " (no absolute target: recorded in BENCHMARKS.md)"));
      } else {
        const double rel = ref_frac > 0 ? learner_frac / ref_frac : 0.0;
        check.details.push_back("yours " + figure(median(value["learner"])) + " " + unit + " (" +
                                fixed(100 * learner_frac, 1) + " % of " + base_line + ")");
        check.details.push_back("reference " + figure(median(value["reference"])) + " " + unit + " (" +
                                fixed(100 * ref_frac, 1) + " %);  yours = " + fixed(100 * rel, 1) +
                                " % of it, need ≥ " + fixed(100 * need_rel, 0) + " %");
        check.data["fraction_of_reference"] = rel;
      }
      if (const std::string peak = peak_line(check.data, median(value["learner"]), variant == "ref" ? "reference" : "yours");
          !peak.empty()) {
        check.details.push_back(peak);
      }
      if (check.data.contains("note")) check.details.push_back(check.data["note"].get<std::string>() + " (last run)");
      if (check.data.contains("learner_kernels")) {
        describe_launched_kernels(check.data["learner_kernels"],
                                  variant == "ref" ? nlohmann::json() : check.data.value("reference_kernels", nlohmann::json()),
                                  variant == "ref" ? "reference" : "yours", check.details, check.hints);
        // The GPU's attributes and the compiler's report describe the same binary: say so when
        // they disagree (e.g. the driver compiled PTX for a newer GPU than the build targeted).
        for (const auto& k : check.data["learner_kernels"]) {
          if (!k.is_object()) continue;
          for (const KernelResources& r : ptxas_figures) {
            if (r.name != k.value("name", std::string()) || r.registers == k.value("registers", -1)) continue;
            check.details.push_back("note: the GPU reports " + std::to_string(k.value("registers", -1)) + " registers for " +
                                    r.name + ", ptxas " + std::to_string(r.registers) + " for " + r.arch +
                                    ": the GPU runs code compiled for another architecture (rebuild for this GPU)");
          }
        }
      }
      if (check.data.contains("slowdowns")) {
        check.details.push_back("warning: the GPU was slowing down (" + check.data["slowdowns"].get<std::string>() + ", SM clock " +
                                std::to_string(check.data.value("sm_clock_mhz", 0)) + " MHz, " +
                                std::to_string(check.data.value("temperature_c", 0)) +
                                " °C): the figures may be low; let it cool and grade again");
      }
      check.details.push_back("medians of alternating runs, each the median of ≥ 11 timed samples after 200 ms of warm-up: " + verdict.note);
      check.data["verdict_note"] = verdict.note;
      check.status = ok ? "pass" : "fail";
      if (!ok && spec.contains("hint")) check.hints.push_back(spec["hint"]);
      if (variant != "ref") mark_stretch(*c, check);
      add(check);
    }
  }
  if (gpu_missing) result.not_run_reason = skip_reason.empty() ? "no GPU" : skip_reason;

  // Grading never changes the learner's files or the reference.
  const bool untouched = hash_tree(lab->labs) == before_labs && hash_tree(lab->solutions) == before_solutions &&
                         (variant != "sub" || hash_tree(source_dir) == before_submission);
  if (!untouched) {
    add({"sources unchanged by grading", "structure", "", "fail", 0,
         {"a file under labs/, solutions/ or the submission changed while grading (a bug in gpulab: please report it)"}, {}});
  }
  return finish(result);
}

}  // namespace gpulab::cli
