/// @file main.cpp
/// @brief The gpulab command line. Run through ./gpulab, which sets up and builds it first.
#include <CLI/CLI.hpp>

#include <iostream>

#include "doctor.hpp"
#include "grade.hpp"
#include "labs.hpp"
#include "learner.hpp"
#include "mpi.hpp"
#include "regions.hpp"
#include "build.hpp"
#include "docs.hpp"
#include "plot.hpp"
#include "selftest.hpp"
#include "sync.hpp"

namespace cli = gpulab::cli;

namespace {

int list_labs(const cli::Paths& paths) {
  std::cout << "The path (curriculum.md has objectives, prerequisites and time for each):\n";
  for (const cli::Lab& lab : cli::discover_labs(paths)) {
    const nlohmann::json info = cli::load_labinfo(paths, lab.number);
    const std::size_t regions = info.is_object() && info.contains("regions") ? info["regions"].size() : 0;
    // Stretch TODOs (lab.json "stretch_todos") are graded and shown, never counted.
    std::string stretch;
    for (const auto& t : lab.meta.value("stretch_todos", std::vector<std::string>{})) stretch += (stretch.empty() ? "" : ", ") + t;
    std::cout << "  " << lab.number << "  " << lab.title() << "\n      status  "
              << cli::progress_line(cli::load_progress(paths), lab.number) << "\n      lesson  lessons/" << lab.slug
              << ".md\n      lab     labs/" << lab.slug << "/  (" << regions << " TODOs"
              << (stretch.empty() ? "" : "; " + stretch + " a stretch goal") << ")\n      grade   ./gpulab grade " << lab.number << "\n";
  }
  std::cout << "  The labs not listed here are planned: curriculum.md has the whole path.\n";
  return 0;
}

int run_sync(const cli::Paths& paths, bool check, bool force) {
  const auto labs = cli::discover_labs(paths);
  const cli::SyncReport r = cli::sync_labs(paths, labs, check, force);
  if (check) {
    for (const auto& d : r.drift) std::cout << "  drift  " << d << '\n';
    if (!r.drift.empty()) {
      std::cout << "sync --check: labs/ differs from what ./gpulab sync would write from solutions/\n";
      return 1;
    }
    std::cout << "sync --check: labs/ matches solutions/ (" << r.unchanged.size() << " files)\n";
    return 0;
  }
  for (const auto& f : r.written) std::cout << "  wrote      labs/" << f << '\n';
  for (const auto& f : r.backed_up) std::cout << "  saved your version as " << f << '\n';
  for (const auto& f : r.refused) std::cout << "  REFUSED    labs/" << f << "  (you changed it; --force moves your version aside first)\n";
  std::cout << "sync: " << r.written.size() << " written, " << r.unchanged.size() << " unchanged, "
            << r.refused.size() << " refused\n";
  return r.refused.empty() ? 0 : 1;
}

/// Writes ladder.svg and roofline.svg into @p dir; false when there was nothing to draw.
bool write_charts(const nlohmann::json& scorecard, const cli::fs::path& dir) {
  bool any = false;
  for (const auto& [name, svg] : {std::pair<std::string, std::string>{"ladder.svg", cli::ladder_svg(scorecard)},
                                  {"roofline.svg", cli::roofline_svg(scorecard)}}) {
    if (svg.empty()) {
      std::cout << "gpulab: no " << name << ": " << (name == "ladder.svg" ? "no performance check was measured"
                                                                          : "no check records its arithmetic intensity and the device's peak")
                << '\n';
      continue;
    }
    cli::write_text(dir / name, svg);
    std::cout << "gpulab: wrote " << (dir / name).string() << '\n';
    any = true;
  }
  return any;
}

int start(const cli::Paths& paths) {
  std::cout << "Welcome to gpulab: GPU programming and distributed training, one lab at a time.\n\n";
  const int health = cli::doctor(paths, /*brief=*/true);
  if (health == 1) return 1;
  std::cout << '\n';
  list_labs(paths);
  std::cout << "\nGrading lab 01 as it is in labs/01-hello-kernel (the unmodified skeleton fails: that is where you start).\n\n";
  cli::GradeOptions g;
  g.lab = "01";
  const cli::GradeResult r = cli::grade(paths, g);
  if (!r.lab.empty()) cli::record_progress(paths, r, "01");  // as `grade 01` would: list and next show it
  std::cout << "\nNext: read lessons/01-hello-kernel.md, fill in the TODOs in labs/01-hello-kernel/hello.cu,\n"
               "then run ./gpulab grade 01 until every line says PASS.\n";
  if (!r.not_run_reason.empty()) {
    std::cout << "No GPU here: the GPU checks need one. Meanwhile `scripts/emulate-tests 01 labs/01-hello-kernel`\n"
                 "runs them on a CPU emulator of thread blocks, to debug your kernels' logic (not a grade).\n";
  }
  return r.exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpulab: a CUDA course and lab suite. Run it as ./gpulab <command>.", "./gpulab"};
  app.require_subcommand(1);
  const cli::Paths paths = cli::Paths::from_environment();

  auto* start_cmd = app.add_subcommand("start", "set up, check the machine, show the path, grade lab 01");
  auto* doctor_cmd = app.add_subcommand("doctor", "what this machine has and what is missing");
  auto* list_cmd = app.add_subcommand("list", "the labs, their lessons and how to grade them");

  cli::GradeOptions grade_options;
  std::uint64_t seed = 0;
  auto* grade_cmd = app.add_subcommand("grade", "build and grade a lab; exit 0 pass, 1 fail, 2 could not run here");
  grade_cmd->add_option("lab", grade_options.lab, "lab number (01) or folder name")->required();
  auto* sub_opt = grade_cmd->add_option("--submission", grade_options.submission,
                                        "grade this folder (same file names as labs/NN-slug) instead of labs/")
                      ->check(CLI::ExistingDirectory);
  grade_cmd->add_flag("--solutions", grade_options.solutions, "grade the reference solution (instructors)")
      ->excludes(sub_opt);
  grade_cmd->add_option("--json", grade_options.json_path, "also write the scorecard as JSON to this file");
  auto* seed_opt = grade_cmd->add_option("--seed", seed, "random seed for the test data (printed by every run)");
  grade_cmd->add_option("--rounds", grade_options.rounds,
                        "performance: at least this many learner/reference alternations (default 3; more, up to 10, "
                        "while the spread is above 2 % or the result within 5 % of the threshold)")
      ->check(CLI::Range(1, 50));
  grade_cmd->add_option("--timeout", grade_options.timeout_s, "seconds per test case (default: the lab's limit)");
  grade_cmd->add_flag("--quiet", grade_options.quiet, "print only failures and the result");
  bool plot = false;
  grade_cmd->add_flag("--plot", plot, "also write SVG charts (ladder, roofline) next to the logs, build/grade/NN/");
  grade_cmd->add_flag("--sanitize", grade_options.sanitize,
                      "also run the GPU cases, small, under compute-sanitizer (memcheck, racecheck, synccheck, initcheck)");
  grade_cmd->add_option("--case", grade_options.cases, "run only this test case (repeatable; exact name)");
  grade_cmd->add_option("--ranks", grade_options.ranks, "distributed labs: run on these numbers of ranks (default: the lab's, e.g. 2 3 4)")
      ->check(CLI::Range(1, 256));

  bool check = false, force = false;
  auto* sync_cmd = app.add_subcommand("sync", "write labs/ from solutions/ (instructors); never over your changes");
  sync_cmd->add_flag("--check", check, "only compare; exit 1 if labs/ differs from what sync would write");
  sync_cmd->add_flag("--force", force, "overwrite changed files after saving them as <file>.bak-<time>");

  cli::SelftestOptions selftest_options;
  bool no_build = false;
  auto* selftest_cmd = app.add_subcommand("selftest", "the project's own tests (the README's test command)");
  selftest_cmd->add_option("--lab", selftest_options.lab, "only this lab");
  selftest_cmd->add_flag("--no-build", no_build, "do not build first");
  selftest_cmd->add_flag("--gpu-plants-only", selftest_options.gpu_plants_only,
                         "grade only the planted submissions that need a GPU (the GPU proof; CI grades the rest)");

  int ranks = 2;
  double mpi_timeout = 120;
  std::string mpi_logs;
  std::vector<std::string> mpi_command;
  auto* mpirun_cmd = app.add_subcommand("mpirun", "run a program on W MPI ranks with a time limit (used by CTest)");
  mpirun_cmd->group("");
  mpirun_cmd->add_option("--ranks", ranks, "number of ranks")->check(CLI::Range(1, 1024));
  mpirun_cmd->add_option("--timeout", mpi_timeout, "seconds before every rank is killed");
  mpirun_cmd->add_option("--logs", mpi_logs, "folder for the per-rank output files")->required();
  mpirun_cmd->add_option("command", mpi_command, "program and arguments (after --)")->required();

  std::string plot_input, plot_out;
  auto* plot_cmd = app.add_subcommand("plot", "SVG charts from a saved scorecard (grade --json FILE)");
  plot_cmd->add_option("scorecard", plot_input, "the JSON file")->required()->check(CLI::ExistingFile);
  plot_cmd->add_option("--out", plot_out, "folder for ladder.svg and roofline.svg (default: next to the JSON)");
  auto* docs_cmd = app.add_subcommand("docs", "build the docs site (Doxygen: the API of common/ and the lessons)");
  auto* next_cmd = app.add_subcommand("next", "the next lab to work on, and how");
  std::string hint_lab, hint_todo;
  int hint_level = 0;
  bool hint_reset = false;
  auto* hint_cmd = app.add_subcommand("hint", "hints for a TODO, one at a time; the last one points at the lesson");
  hint_cmd->add_option("lab", hint_lab, "lab number")->required();
  hint_cmd->add_option("todo", hint_todo, "the TODO: 3 or 01.3 (none: list them)");
  hint_cmd->add_option("--level", hint_level, "show hints up to this one")->check(CLI::Range(1, 20));
  hint_cmd->add_flag("--reset", hint_reset, "start the ladder again");
  cli::GradeOptions watch_options;
  int watch_runs = 0;
  auto* watch_cmd = app.add_subcommand("watch", "grade a lab again whenever one of its files changes");
  watch_cmd->add_option("lab", watch_options.lab, "lab number")->required();
  watch_cmd->add_option("--submission", watch_options.submission, "watch this folder instead of labs/NN-slug")
      ->check(CLI::ExistingDirectory);
  watch_cmd->add_option("--case", watch_options.cases, "only this test case (repeatable)");
  watch_cmd->add_option("--max-runs", watch_runs, "stop after this many grades (0: never)");
  watch_cmd->add_flag("--quiet", watch_options.quiet, "print only failures and the result");

  std::string filter_file;
  auto* filter_cmd = app.add_subcommand("doc-filter", "Doxygen input filter for markdown (used by the docs build)");
  filter_cmd->group("");
  filter_cmd->add_option("file", filter_file)->required()->check(CLI::ExistingFile);

  std::string mode, region, lab_slug, input, output;
  auto* render_cmd = app.add_subcommand("render", "render a skeleton or mutant file (used by the build)");
  render_cmd->group("");  // hidden from --help
  render_cmd->add_option("--mode", mode)->required()->check(CLI::IsMember({"skeleton", "mutant"}));
  render_cmd->add_option("--region", region);
  render_cmd->add_option("--lab", lab_slug)->required();
  render_cmd->add_option("--input", input)->required()->check(CLI::ExistingFile);
  render_cmd->add_option("--output", output)->required();

  CLI11_PARSE(app, argc, argv);

  try {
    if (*start_cmd) return start(paths);
    if (*doctor_cmd) return cli::doctor(paths);
    if (*list_cmd) return list_labs(paths);
    if (*grade_cmd) {
      if (*seed_opt) grade_options.seed = seed;
      const cli::GradeResult result = cli::grade(paths, grade_options);
      if (plot && !result.lab.empty()) {
        write_charts(result.to_json(), paths.build / "grade" / result.lab.substr(0, 2));
      }
      // Progress is the learner's own copy, graded whole.
      if (grade_options.submission.empty() && !grade_options.solutions && grade_options.cases.empty() && !result.lab.empty()) {
        cli::record_progress(paths, result, result.lab.substr(0, 2));
      }
      return result.exit_code;
    }
    if (*plot_cmd) {
      const auto scorecard = nlohmann::json::parse(cli::read_text(plot_input));
      return write_charts(scorecard, plot_out.empty() ? cli::fs::absolute(plot_input).parent_path() : cli::fs::path(plot_out)) ? 0 : 2;
    }
    if (*docs_cmd) {
      const cli::BuildResult b = cli::build_targets(paths, {"docs"});
      if (!b.ok) {
        // Doxygen writes its warnings to a log file (WARN_LOGFILE), not to the build's output.
        const cli::fs::path log = paths.build / "docs" / "warnings.log";
        const std::string warnings = cli::fs::exists(log) ? cli::read_text(log) : std::string();
        std::cout << b.output << warnings << "\ngpulab docs: the site did not build"
                  << (b.output.find("not installed") != std::string::npos ? " (apt-get install doxygen)" : " (warnings are errors: see above)")
                  << '\n';
        return 1;
      }
      std::cout << "gpulab docs: " << (paths.build / "docs" / "html" / "index.html").string() << '\n';
      return 0;
    }
    if (*next_cmd) return cli::next_lab(paths);
    if (*hint_cmd) return cli::hint(paths, hint_lab, hint_todo, hint_level, hint_reset);
    if (*watch_cmd) return cli::watch(paths, watch_options, watch_runs, 0.5);
    if (*sync_cmd) return run_sync(paths, check, force);
    if (*selftest_cmd) {
      selftest_options.build = !no_build;
      return cli::selftest(paths, selftest_options);
    }
    if (*mpirun_cmd) return cli::mpirun_command(ranks, mpi_timeout, mpi_logs, mpi_command);
    if (*filter_cmd) {
      std::cout << cli::doxygen_markdown(cli::read_text(filter_file), filter_file);
      return 0;
    }
    if (*render_cmd) {
      if (mode == "mutant" && region.empty()) throw std::invalid_argument("render --mode mutant needs --region");
      cli::write_text(output, cli::render(cli::read_text(input), input, lab_slug, mode == "mutant" ? region : ""));
      return 0;
    }
  } catch (const std::exception& e) {
    std::cerr << "gpulab: " << e.what() << '\n';
    return 1;
  }
  return 1;
}
