/// @file main.cpp
/// @brief The gpulab command line. Run through ./gpulab, which sets up and builds it first.
#include <CLI/CLI.hpp>

#include <functional>
#include <iostream>

#include "commands.hpp"
#include "grade/verdict.hpp"
#include "run/cluster.hpp"

namespace cli = gpulab::cli;

namespace {

/// A subcommand and what runs when it is chosen.
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

void grade_flags(CLI::App* cmd, cli::GradeOptions& o) {
  cmd->add_option("lab", o.lab, "lab number (01) or folder name")->required();
  auto* sub = cmd->add_option("--submission", o.submission, "grade this folder (same file names as labs/NN-slug) instead of labs/")
                  ->check(CLI::ExistingDirectory);
  cmd->add_flag("--solutions", o.solutions, "grade the reference solution (instructors)")->excludes(sub);
  cmd->add_option("--case", o.cases, "run only this test case (repeatable; exact name)");
  cmd->add_option("--part", o.part, "a lab in parts (04): grade only this part (./gpulab list shows them)")->check(CLI::Range(1, 9));
  cmd->add_flag("--quiet", o.quiet, "print only failures and the result");
  cmd->add_flag("--verbose", o.verbose, "also print what every check found when it held (the figures behind a PASS)");
}

Command grade_command(CLI::App& app, const cli::Paths& paths) {
  static cli::GradeOptions o;
  static std::uint64_t seed = 0;
  static bool plot = false;
  auto* cmd = app.add_subcommand("grade", "build and grade a lab; exit 0 pass, 1 fail, 2 could not run here");
  grade_flags(cmd, o);
  cmd->add_option("--json", o.json_path, "also write the scorecard as JSON to this file");
  auto* format = cmd->add_option("--format", o.format,
                                 "also write the points (lab.json \"points\") as gradescope (results.json), classroom (GitHub Classroom's "
                                 "autograding result) or junit (XML), to --out")
                     ->check(CLI::IsMember({"gradescope", "classroom", "junit"}));
  cmd->add_option("--out", o.out_path, "the file --format writes")->needs(format);
  format->needs(cmd->get_option("--out"));
  auto* seed_opt = cmd->add_option("--seed", seed, "random seed for the test data (printed by every run)");
  cmd->add_option("--rounds", o.rounds, "performance: " + cli::describe_rules(cli::VerdictRules{}))->check(CLI::Range(1, 50));
  cmd->add_option("--max-rounds", o.max_rounds, "performance: at most this many rounds")->check(CLI::Range(1, 100));
  cmd->add_option("--timeout", o.timeout_s, "seconds per test case (default: the lab's limit)");
  cmd->add_flag("--no-sandbox{false}", o.sandbox, "run the code under test outside bubblewrap and the seccomp filter (the scorecard and its JSON say so)");
  cmd->add_flag("--plot", plot, "also write SVG charts (ladder, roofline) next to the logs, build/grade/NN/");
  cmd->add_flag("--sanitize", o.sanitize, "also run the GPU cases, small, under compute-sanitizer (memcheck, racecheck, synccheck, initcheck)");
  cmd->add_flag("--profile", o.profile, "also run the lab's fused kernels once under Nsight Compute: kernels per NVTX range, bytes moved against the minimum");
  cmd->add_option("--ranks", o.ranks, "distributed labs: run on these numbers of ranks (default: the lab's, e.g. 2 3 4)")->check(CLI::Range(1, 256));
  cmd->add_option("--nodes", o.nodes, "distributed labs: place the ranks across the N nodes of `./gpulab cluster up --nodes N` (TCP)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--link-rate", o.link_rate, "with --nodes: the link rate the cluster must have been made with (e.g. 1gbit)");
  cmd->add_option("--fault", o.faults, "across hosts (--nodes, --hostfile, --launcher slurm): kill:RANK@SECONDS in every distributed run; with --nodes also link-down:NODE@SECONDS (repeatable)");
  cmd->add_option("--launcher", o.launcher,
                  "distributed labs: local (mpirun on this machine), hostfile (with --hostfile), slurm (mpirun inside your allocation: salloc -N 2 "
                  "--ntasks-per-node=4 first); default: slurm inside an allocation (SLURM_JOB_ID), hostfile with --hostfile, else local")
      ->check(CLI::IsMember({"local", "hostfile", "slurm"}));
  cmd->add_option("--hostfile", o.hostfile,
                  "distributed labs: run the ranks on a real cluster's hosts (an OpenMPI hostfile; mpirun reaches them over ssh; the course's tree must be on a filesystem they all mount)");
  return {cmd, [&paths, seed_opt] {
            if (*seed_opt) o.seed = seed;
            return cli::grade_and_record(paths, o, plot);
          }};
}

Command emulate_command(CLI::App& app, const cli::Paths& paths) {
  static cli::GradeOptions o;
  static std::uint64_t seed = 12345;
  auto* cmd = app.add_subcommand("emulate", "run a lab's GPU test cases on the CPU block emulator (logic, not speed; not a grade)");
  grade_flags(cmd, o);
  cmd->add_option("--seed", seed, "random seed for the test data");
  return {cmd, [&paths] {
            o.seed = seed;
            return cli::emulate_command(paths, o);
          }};
}

Command selftest_command(CLI::App& app, const cli::Paths& paths) {
  static cli::SelftestOptions o;
  static bool no_build = false;
  auto* cmd = app.add_subcommand("selftest", "the project's own tests (the README's test command)");
  cmd->add_option("--lab", o.lab, "only this lab");
  cmd->add_flag("--no-build", no_build, "do not build first");
  cmd->add_option("--jobs", o.jobs, "2 (default): the labs graded by two workers side by side, longest first; 1: one lab after another")->check(CLI::Range(1, 2));
  cmd->add_flag("--gpu-plants-only", o.gpu_plants_only, "grade only the planted submissions that need a GPU (the GPU proof; CI grades the rest)");
  cmd->add_flag("--class", o.class_only, "only the class: every submission of lab 06's class, hostile ones included, through grade-class");
  return {cmd, [&paths] {
            o.build = !no_build;
            return cli::selftest(paths, o);
          }};
}

Command grade_class_command(CLI::App& app, const cli::Paths& paths) {
  static cli::ClassOptions o;
  auto* cmd = app.add_subcommand("grade-class", "instructors: grade a folder of submissions (folders, .zip, .tar.gz) into a gradebook and a leaderboard");
  cmd->add_option("lab", o.lab, "lab number (08) or folder name")->required();
  cmd->add_option("submissions", o.submissions, "the folder of submissions, one per student (named after the student)")->required();
  cmd->add_option("--out", o.out, "where the results go (default build/class/NN-slug)");
  cmd->add_option("--timeout", o.timeout_s, "seconds per student's grade (default 3600)")->check(CLI::PositiveNumber);
  cmd->add_option("--memory-mb", o.memory_mb, "resident memory of each test process, at most (default 16384 MiB)")->check(CLI::PositiveNumber);
  return {cmd, [&paths] { return cli::grade_class(paths, o); }};
}

Command bundle_command(CLI::App& app, const cli::Paths& paths) {
  static cli::BundleOptions o;
  auto* cmd = app.add_subcommand("bundle",
                                 "instructors: a lab's autograder for Gradescope (setup.sh, run_autograder, the course at HEAD) or a "
                                 "GitHub Classroom template repository (the lab's files and an autograding workflow)");
  cmd->add_option("lab", o.lab, "lab number (08) or folder name")->required();
  cmd->add_option("--for", o.platform, "the platform: gradescope (default) or classroom")->check(CLI::IsMember({"gradescope", "classroom"}));
  cmd->add_option("--course-repo", o.course_repo, "classroom: the course's GitHub repository, OWNER/NAME (default: origin's)");
  cmd->add_option("--out", o.out, "where it goes (default build/bundle/NN-slug-PLATFORM)");
  return {cmd, [&paths] { return cli::make_bundle(paths, o); }};
}

Command sync_command(CLI::App& app, const cli::Paths& paths) {
  static bool check = false, force = false;
  auto* cmd = app.add_subcommand("sync", "write labs/ from solutions/ (instructors); never over your changes");
  cmd->add_flag("--check", check, "only compare; exit 1 if labs/ differs from what sync would write");
  cmd->add_flag("--force", force, "overwrite changed files after saving them as <file>.bak-<time>");
  return {cmd, [&paths] { return cli::run_sync(paths, check, force); }};
}

Command hint_command(CLI::App& app, const cli::Paths& paths) {
  static std::string lab, todo;
  static int level = 0;
  static bool reset = false;
  auto* cmd = app.add_subcommand("hint", "hints for a TODO (hint 06 2, or hint 06.2), one at a time: the lesson section first, the whole recipe last");
  cmd->add_option("lab", lab, "lab number")->required();
  cmd->add_option("todo", todo, "the TODO: 3 or 01.3 (none: list them)");
  cmd->add_option("--level", level, "show hints up to this one")->check(CLI::Range(1, 20));
  cmd->add_flag("--reset", reset, "start the ladder again");
  return {cmd, [&paths] { return cli::hint(paths, lab, todo, level, reset); }};
}

Command watch_command(CLI::App& app, const cli::Paths& paths) {
  static cli::GradeOptions o;
  static int runs = 0;
  auto* cmd = app.add_subcommand("watch", "grade a lab again whenever one of its files changes");
  cmd->add_option("lab", o.lab, "lab number")->required();
  cmd->add_option("--submission", o.submission, "watch this folder instead of labs/NN-slug")->check(CLI::ExistingDirectory);
  cmd->add_option("--case", o.cases, "only this test case (repeatable)");
  cmd->add_option("--part", o.part, "a lab in parts (04): only this part")->check(CLI::Range(1, 9));
  cmd->add_option("--max-runs", runs, "stop after this many grades (0: never)");
  cmd->add_flag("--quiet", o.quiet, "print only failures and the result");
  return {cmd, [&paths] { return cli::watch(paths, o, runs, 0.5); }};
}

Command cluster_command(CLI::App& app, const cli::Paths& paths) {
  static cli::ClusterPlan plan;
  static std::string action;
  auto* cmd = app.add_subcommand("cluster", "a cluster on this machine: network namespaces over rate-limited links (root)");
  cmd->add_option("action", action, "up, down or status")->required()->check(CLI::IsMember({"up", "down", "status"}));
  cmd->add_option("--nodes", plan.nodes, "up: how many nodes (network namespaces)")->check(CLI::Range(1, 64));
  cmd->add_option("--link-rate", plan.link_rate, "up: every node's link rate, as tc says it (100mbit, 1gbit, 10gbit); default unshaped");
  cmd->add_option("--ranks-per-node", plan.ranks_per_node, "up: MPI slots per node")->check(CLI::Range(1, 64));
  cmd->add_option("--with", plan.with,
                  "up: ssh starts an sshd in each node and mpirun reaches the nodes over ssh with a hostfile; slurm starts munged, slurmctld and a slurmd "
                  "in each node (then: salloc -N N ./gpulab grade NN --launcher slurm); default: ip netns exec")
      ->check(CLI::IsMember({"ssh", "slurm"}));
  return {cmd, [&paths] { return cli::cluster_command(paths, action, plan); }};
}

Command summary_command(CLI::App& app) {
  static std::vector<std::string> files;
  auto* cmd = app.add_subcommand("summary", "a short results table from saved scorecards (grade --json) or selftest's rows");
  cmd->add_option("files", files, "JSON files (build/selftest/*.json)")->required()->check(CLI::ExistingFile);
  return {cmd, [] { return cli::summary_command(files); }};
}

Command plot_command(CLI::App& app) {
  static std::string input, out;
  auto* cmd = app.add_subcommand("plot", "SVG charts from a saved scorecard (grade --json FILE)");
  cmd->add_option("scorecard", input, "the JSON file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--out", out, "folder for ladder.svg and roofline.svg (default: next to the JSON)");
  return {cmd, [] { return cli::plot_command(input, out); }};
}

/// Commands the build and the test harness use, hidden from --help.
void internal_commands(CLI::App& app, std::vector<Command>& commands) {
  static int ranks = 2;
  static double timeout = 120;
  static std::string logs, filter_file, mode, region, slug, input, output;
  static std::vector<std::string> command;
  auto* mpirun = app.add_subcommand("mpirun", "run a program on W MPI ranks with a time limit (used by CTest)");
  mpirun->group("");
  mpirun->add_option("--ranks", ranks, "number of ranks")->check(CLI::Range(1, 1024));
  mpirun->add_option("--timeout", timeout, "seconds before every rank is killed");
  mpirun->add_option("--logs", logs, "folder for the per-rank output files")->required();
  mpirun->add_option("command", command, "program and arguments (after --)")->required();
  commands.push_back({mpirun, [] { return cli::mpirun_command(ranks, timeout, logs, command); }});
  auto* filter = app.add_subcommand("doc-filter", "Doxygen input filter for markdown (used by the docs build)");
  filter->group("");
  filter->add_option("file", filter_file)->required()->check(CLI::ExistingFile);
  commands.push_back({filter, [] { return cli::doc_filter(filter_file); }});
  auto* render = app.add_subcommand("render", "render a skeleton or mutant file (used by the build)");
  render->group("");
  render->add_option("--mode", mode)->required()->check(CLI::IsMember({"skeleton", "mutant"}));
  render->add_option("--region", region);
  render->add_option("--lab", slug)->required();
  render->add_option("--input", input)->required()->check(CLI::ExistingFile);
  render->add_option("--output", output)->required();
  commands.push_back({render, [] { return cli::render_command(mode, region, slug, input, output); }});
  auto* transform = app.add_subcommand("emu-transform", "rewrite a .cu file for the CPU emulator (used by the build)");
  transform->group("");
  transform->add_option("--input", input)->required()->check(CLI::ExistingFile);
  transform->add_option("--output", output)->required();
  commands.push_back({transform, [] { return cli::emu_transform_command(input, output); }});
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpulab: a CUDA course and lab suite. Run it as ./gpulab <command>.", "./gpulab"};
  app.require_subcommand(1);
  const cli::Paths paths = cli::Paths::from_environment();
  std::vector<Command> commands = {
      {app.add_subcommand("start", "set up, check the machine, show the path, grade lab 01"), [&] { return cli::start(paths); }},
      {app.add_subcommand("doctor", "what this machine has and what is missing"), [&] { return cli::doctor(paths); }},
      {app.add_subcommand("list", "the labs, their lessons and how to grade them"), [&] { return cli::list_labs(paths); }},
      {app.add_subcommand("next", "the next lab to work on, and how"), [&] { return cli::next_lab(paths); }},
      {app.add_subcommand("docs", "build the docs site (Doxygen: the API of common/ and the lessons)"), [&] { return cli::docs_command(paths); }},
      grade_command(app, paths), emulate_command(app, paths), selftest_command(app, paths), grade_class_command(app, paths), bundle_command(app, paths), sync_command(app, paths),
      hint_command(app, paths), watch_command(app, paths), cluster_command(app, paths), plot_command(app), summary_command(app)};
  internal_commands(app, commands);
  auto* gpu_plan = app.add_subcommand("gpu-plan", "the GPU proof's grades from every lab.json (used by scripts/gpu-check)");
  gpu_plan->group("");
  commands.push_back({gpu_plan, [&] { return cli::gpu_plan_command(paths); }});
  CLI11_PARSE(app, argc, argv);
  cli::install_interrupt_handlers();
  try {
    for (const Command& c : commands) {
      if (*c.app) return c.run();
    }
  } catch (const cli::Interrupted& e) {
    std::cerr << "\ngpulab: " << e.what() << ": everything it started was stopped\n";
    return 128 + e.signal;  // 130 for Ctrl-C, 141 for a closed pipe, as the shell reports a death by that signal
  } catch (const std::exception& e) {
    std::cerr << "gpulab: " << e.what() << '\n';
    return 1;
  }
  return 1;
}
