/// @file stage_integrity.cpp
/// @brief The learner's processes under guard (LearnerRuns) and the integrity stage: the grader's files and the learner's trees unchanged by grading.
#include "grade/build.hpp"
#include <cstdlib>
#include <sstream>

#include "grade/grade_stages.hpp"

namespace gpulab::cli {

void LearnerRuns::arm(const GradeInputs& in) {
  confine_.launcher = in.paths.build / "bin" / "gpulab-launch";
  if (!fs::exists(confine_.launcher)) (void)build_targets(in.paths, {"gpulab-launch"});
  std::vector<fs::path> artefacts = {confine_.launcher};
  for (const std::string& f : in.lab.build.grader_files) artefacts.emplace_back(f);
  if (const Variant* emu_ref = in.lab.build.variant("emu_ref"); emu_ref != nullptr && fs::exists(emu_ref->exe)) artefacts.emplace_back(emu_ref->exe);
  std::vector<fs::path> documents = {in.paths.state_dir() / "progress.json", in.paths.state_dir() / "hints.json"};
  // Every file the build reads, as the build recorded it (tests/support, common/, tools/, the
  // CMake files, ...): the next build would compile what a learner process wrote there. The lab's
  // own tests/ and solutions/ are guarded as folders (a file added there counts too); the
  // learner's files are checked at the end (stage_integrity).
  const std::vector<fs::path> read = build_inputs(in.paths, {in.lab.tests, in.lab.solutions, in.lab.labs, in.source_dir});
  std::vector<fs::path> folders = {in.lab.tests, in.lab.solutions};
  if (read.empty()) {
    // Not a Ninja build: the folders the build reads, whole.
    for (const char* f : {"tests", "common", "tools", "cmake"}) folders.push_back(in.paths.root / f);
    folders.erase(folders.begin());  // tests/<lab> is inside tests/
  }
  documents.insert(documents.end(), read.begin(), read.end());
  guard_ = TreeGuard(artefacts, folders, documents, in.paths.build / "grade" / ("snapshot-" + in.lab.number));
  if (!fs::exists(confine_.launcher)) {
    confine_.launcher.clear();
    confine_.seccomp = false;
    confine_.not_sandboxed = "gpulab-launch could not be built";
    return;
  }
  // grade-class: each test process's resident memory, at most (MiB), enforced by the launcher.
  if (const char* mb = std::getenv("GPULAB_LIMIT_MEMORY_MB"); mb != nullptr && std::atol(mb) > 0) confine_.memory_mb = std::atol(mb);
  ProcessOptions ask;
  ask.timeout_s = 20;
  const ProcessResult features = run_process({confine_.launcher.string(), "--features"}, ask);
  if (features.output.rfind("seccomp", 0) != 0) {
    confine_.seccomp = false;
    confine_.no_seccomp = features.output.substr(0, features.output.find('\n'));
    if (confine_.no_seccomp.rfind("no-seccomp: ", 0) == 0) confine_.no_seccomp.erase(0, 12);
  }
  if (!in.options.sandbox) {
    confine_.not_sandboxed = "--no-sandbox";
    confine_.seccomp = false;
    confine_.no_seccomp = "--no-sandbox";
    return;
  }
  if (in.options.nodes > 0) {
    confine_.not_sandboxed = "the ranks are launched into the cluster's network namespaces (--nodes), which bubblewrap cannot enter";
    return;
  }
  if (in.options.launcher == "hostfile") {
    confine_.not_sandboxed = "the ranks run on the hostfile's hosts, started by mpirun over ssh (--hostfile): bubblewrap's empty network would cut mpirun off from them";
    return;
  }
  if (in.options.launcher == "slurm") {
    confine_.not_sandboxed = "the ranks run on the allocation's nodes, started through Slurm (--launcher slurm): bubblewrap's empty network would cut mpirun off from them";
    return;
  }
  if (!sandbox_available()) {
    confine_.not_sandboxed = sandbox_missing();
    return;
  }
  // Everything read-only; the grader's sources, the reference's and every other build hidden. The
  // program under test and the launcher are shown again, one run at a time (run_case).
  Sandbox box;
  box.keep = {in.paths.root.string()};  // a tree under /tmp, which the sandbox replaces
  for (const fs::path& p : {in.paths.root / "tests", in.paths.root / "solutions", in.paths.root / "tools", in.paths.root / "common",
                            in.paths.root / ".git", in.paths.build}) {
    box.hide.push_back(p.string());
  }
  if (in.sources == Sources::kSubmission) box.hide.push_back(in.compiled_dir.string());
  // grade-class: the class's other submissions and results (a colon-separated list of folders).
  if (const char* more = std::getenv("GPULAB_SANDBOX_HIDE")) {
    std::istringstream list(more);
    for (std::string p; std::getline(list, p, ':');) {
      if (!p.empty() && fs::path(p).is_absolute()) box.hide.push_back(p);
    }
  }
  confine_.sandbox = box;
}

bool LearnerRuns::untampered(Scorecard& card) {
  if (!guard_.armed()) return true;
  const std::string change = guard_.check_and_repair();
  if (change.empty()) return true;
  card.add(Check::failure("the grader's files unchanged", Kind::kIntegrity,
                          change + " while the code under test ran: tampering, so the grade stops here (it was put back)",
                          "the code of a lab reads and writes only the buffers it is given"));
  return false;
}

void stage_integrity(const GradeInputs& in, const TreesBefore& before, LearnerRuns& runs, Scorecard& card) {
  if (!runs.untampered(card)) return;
  // Grading never changes the learner's files or the reference.
  std::string change = first_tree_change(before.labs, hash_tree(in.lab.labs), "labs/" + in.lab.slug + "/");
  if (change.empty()) change = first_tree_change(before.solutions, hash_tree(in.lab.solutions), "solutions/" + in.lab.slug + "/");
  if (change.empty() && in.sources == Sources::kSubmission) {
    change = first_tree_change(before.submission, hash_tree(in.source_dir), in.source_dir.string() + "/");
  }
  if (!change.empty()) {
    card.add(Check::failure("sources unchanged by grading", Kind::kIntegrity, change + " while grading"));
  }
}

}  // namespace gpulab::cli
