/// @file catch_runner.cpp
/// @brief Catch2's implementation and the gpulab test main (see catch_runner.hpp).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "catch_runner.hpp"
#include "gpulab/random.hpp"
#include "gpulab/report.hpp"

namespace {

gpulab::testing::FatalFailureHook& fatal_hook() {
  static gpulab::testing::FatalFailureHook hook = nullptr;
  return hook;
}

/// What each case that ran ended with, as Catch2 counted it.
struct Ended {
  std::string name;
  std::size_t passed = 0, failed = 0;
};
std::vector<Ended>& ended_cases() {
  static std::vector<Ended> cases;
  return cases;
}

/// The completion records (see catch_runner.hpp), written once the session has returned: a
/// process that ends any other way leaves none, and the grader does not count its case.
void record_completion(const std::vector<std::pair<std::string, std::string>>& skipped) {
  const char* token = std::getenv("GPULAB_RUN_TOKEN");
  const std::string run_token = token != nullptr ? token : "";
  for (const Ended& e : ended_cases()) {
    gpulab::report::record({{"kind", "completion"}, {"case", e.name}, {"assertions_passed", e.passed},
                            {"assertions_failed", e.failed}, {"token", run_token}});
  }
  for (const auto& [name, reason] : skipped) {
    gpulab::report::record({{"kind", "completion"}, {"case", name}, {"skipped", reason}, {"token", run_token}});
  }
  // The runner's last word: a record after this one comes from a static destructor or an exit
  // handler, after every case had ended, and the grader fails the run for it.
  gpulab::report::record({{"kind", "end"}, {"case", ""}, {"token", run_token}});
}

/// Names the running case for gpulab::report records, and reports fatal failures to the hook.
struct CaseNameListener : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  bool assertionEnded(Catch::AssertionStats const& stats) override {
    const Catch::AssertionResult& r = stats.assertionResult;
    const bool stops_case = !r.isOk() && !Catch::shouldContinueOnFailure(r.m_info.resultDisposition);
    if (stops_case && fatal_hook() != nullptr) {
      std::string message = r.getSourceInfo().file + std::string(":") + std::to_string(r.getSourceInfo().line) +
                            ": " + (r.hasExpression() ? r.getExpressionInMacro() : std::string()) +
                            (r.hasMessage() ? " " + r.getMessage() : std::string());
      for (const auto& info : stats.infoMessages) message += "\n  " + info.message;
      fatal_hook()(message);
    }
    return TestEventListenerBase::assertionEnded(stats);
  }
  void testCaseStarting(Catch::TestCaseInfo const& info) override {
    gpulab::report::set_current_case(info.name);
  }
  void testCaseEnded(Catch::TestCaseStats const& stats) override {
    gpulab::report::set_current_case("");
    ended_cases().push_back({stats.testInfo.name, stats.totals.assertions.passed, stats.totals.assertions.failed});
    TestEventListenerBase::testCaseEnded(stats);
  }
};

enum class Kind { kCpu, kGpu, kInvalid };

bool has_tag(const Catch::TestCaseInfo& info, const std::string& tag) {
  return std::find(info.lcaseTags.begin(), info.lcaseTags.end(), tag) != info.lcaseTags.end();
}

/// Whether a program is on PATH (for what a tag needs).
bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  for (std::size_t start = 0; start <= dirs.size();) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string file = dirs.substr(start, end - start) + "/" + program;
    if (end > start && access(file.c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

/// Why a [cluster] case cannot run here ("" when it can): it makes network namespaces (root and
/// iproute2) and launches ranks into them (mpirun). Such a case is skipped and says so — never
/// counted as passed where it did not run.
std::string cluster_unavailable() {
  if (geteuid() != 0) return "needs root to make network namespaces (sudo ctest -L cluster)";
  if (!on_path("ip")) return "needs iproute2 (ip) to make network namespaces";
  if (!on_path("mpirun")) return "needs OpenMPI (mpirun) to launch ranks across the namespaces";
  if (!on_path("unshare")) return "needs util-linux (unshare) to give each node its own hostname";
  // Root in a container without CAP_NET_ADMIN / CAP_SYS_ADMIN cannot make namespaces.
  if (std::system("unshare --net --uts true >/dev/null 2>&1") != 0) {
    return "root, but namespaces cannot be made here (unshare --net --uts failed: a container without CAP_SYS_ADMIN?)";
  }
  return "";
}

Kind kind_of(const Catch::TestCaseInfo& info) {
  bool cpu = false, gpu = false;
  for (const std::string& tag : info.lcaseTags) {
    cpu = cpu || tag == "cpu";
    gpu = gpu || tag == "gpu";
  }
  if (cpu == gpu) return Kind::kInvalid;
  return cpu ? Kind::kCpu : Kind::kGpu;
}

/// Names are passed to the test binary as test specs, one per process; these characters have
/// meanings there (OR, tags, quoting, escaping, wildcards, negation) or in CMake lists (;).
bool name_is_plain(const std::string& name) {
  return !name.empty() && name.find_first_of(",;[]\"\\*~\t\n") == std::string::npos;
}

bool validate(const std::vector<Catch::TestCase>& cases) {
  bool ok = true;
  for (const auto& tc : cases) {
    if (kind_of(tc) == Kind::kInvalid) {
      std::fprintf(stderr, "gpulab: test case \"%s\" (%s:%zu) must carry exactly one of [cpu] and [gpu]\n",
                   tc.name.c_str(), tc.lineInfo.file, tc.lineInfo.line);
      ok = false;
    }
    if (!name_is_plain(tc.name)) {
      std::fprintf(stderr, "gpulab: test case name \"%s\" (%s:%zu) may not contain , ; [ ] \" \\ * ~ or tabs\n",
                   tc.name.c_str(), tc.lineInfo.file, tc.lineInfo.line);
      ok = false;
    }
  }
  return ok;
}

}  // namespace

CATCH_REGISTER_LISTENER(CaseNameListener)

namespace gpulab::testing {

void set_fatal_failure_hook(FatalFailureHook hook) { fatal_hook() = hook; }

int run_tests(int argc, char** argv, DeviceProbeFn probe) {
  // Take our own flags out before Catch2 sees the command line.
  bool list_only = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--gpulab-probe") == 0) {
      // The grader's device probe: 0 when a CUDA device is usable, else 77 and the reason.
      const std::string why_not = probe != nullptr ? probe() : std::string("built without CUDA");
      if (!why_not.empty()) std::printf("%s\n", why_not.c_str());
      return why_not.empty() ? 0 : 77;
    }
    if (std::strcmp(argv[i], "--gpulab-list") == 0) {
      list_only = true;
    } else {
      args.push_back(argv[i]);
    }
  }

  Catch::Session session;
  if (session.applyCommandLine(static_cast<int>(args.size()), args.data()) != 0) return 1;
  const Catch::ConfigData& data = session.configData();
  if (data.showHelp || data.listTests || data.listTestNamesOnly || data.listTags ||
      data.listReporters) {
    return session.run() == 0 ? 0 : 1;
  }

  const auto& all = Catch::getAllTestCasesSorted(session.config());
  if (list_only) {
    if (!validate(all)) return 1;
    for (const auto& tc : all) {
      // The test file, by name: a lab in parts (lab.json "parts") grades a part by its test files.
      const char* slash = std::strrchr(tc.lineInfo.file, '/');
      std::printf("%s\t%s\t%s\t%s\n", kind_of(tc) == Kind::kCpu ? "cpu" : "gpu", tc.name.c_str(),
                  tc.tagsAsString().c_str(), slash != nullptr ? slash + 1 : tc.lineInfo.file);
    }
    return 0;
  }

  const std::vector<Catch::TestCase> selected =
      Catch::filterTests(all, session.config().testSpec(), session.config());
  if (selected.empty()) {
    std::fprintf(stderr, "gpulab: no test case matches the filter; nothing was run\n");
    return 1;
  }
  if (!validate(selected)) return 1;

  // Cases that cannot run here are skipped, with the reason recorded: [gpu] ones without a usable
  // device, [cluster] ones without root, iproute2 or mpirun.
  std::vector<std::string> cpu_names, gpu_names, cluster_names;
  // Probed only when a [cluster] case is selected: the probe makes a namespace.
  const bool wants_cluster = std::any_of(selected.begin(), selected.end(), [](const Catch::TestCase& tc) { return has_tag(tc, "cluster"); });
  const std::string cluster_why_not = wants_cluster ? cluster_unavailable() : std::string();
  // [ssh] cluster cases start an sshd in each node: OpenSSH's server too (./gpulab installs it
  // along with iproute2 where apt-get can run).
  const std::string ssh_why_not = access("/usr/sbin/sshd", X_OK) == 0 ? "" : "needs OpenSSH's server (/usr/sbin/sshd: apt-get install openssh-server)";
  // [slurm] ones start munged, slurmctld and slurmds: Slurm and munge too.
  const std::string slurm_why_not = access("/usr/sbin/slurmd", X_OK) == 0 && access("/usr/sbin/slurmctld", X_OK) == 0 &&
                                            access("/usr/sbin/munged", X_OK) == 0 && on_path("salloc")
                                        ? "" : "needs Slurm and munge (apt-get install slurm-wlm munge)";
  std::vector<std::string> ssh_names, slurm_names;
  for (const auto& tc : selected) {
    if (has_tag(tc, "cluster") && !cluster_why_not.empty()) {
      cluster_names.push_back(tc.name);
    } else if (has_tag(tc, "ssh") && !ssh_why_not.empty()) {
      ssh_names.push_back(tc.name);
    } else if (has_tag(tc, "slurm") && !slurm_why_not.empty()) {
      slurm_names.push_back(tc.name);
    } else {
      (kind_of(tc) == Kind::kGpu ? gpu_names : cpu_names).push_back(tc.name);
    }
  }
  std::vector<std::pair<std::string, std::string>> skipped;
  if (!cluster_names.empty()) {
    std::printf("gpulab: SKIPPED %zu [cluster] case(s): %s\n", cluster_names.size(), cluster_why_not.c_str());
    for (const auto& name : cluster_names) skipped.emplace_back(name, cluster_why_not);
  }
  if (!ssh_names.empty()) {
    std::printf("gpulab: SKIPPED %zu [ssh] case(s): %s\n", ssh_names.size(), ssh_why_not.c_str());
    for (const auto& name : ssh_names) skipped.emplace_back(name, ssh_why_not);
  }
  if (!slurm_names.empty()) {
    std::printf("gpulab: SKIPPED %zu [slurm] case(s): %s\n", slurm_names.size(), slurm_why_not.c_str());
    for (const auto& name : slurm_names) skipped.emplace_back(name, slurm_why_not);
  }
  const bool needs_gpu = !gpu_names.empty();

  std::printf("gpulab: seed %llu (GPULAB_SEED=%llu reproduces this run)\n",
              static_cast<unsigned long long>(gpulab::test_seed()),
              static_cast<unsigned long long>(gpulab::test_seed()));
  std::fflush(stdout);

  if (cpu_names.empty() && gpu_names.empty()) {
    record_completion(skipped);
    return 77;
  }
  bool skipped_gpu = false;
  std::string why_not;
  if (needs_gpu) {
    why_not = probe != nullptr ? probe() : std::string("built without CUDA");
    if (!why_not.empty()) {
      std::printf("gpulab: SKIPPED %zu [gpu] case(s): %s\n", gpu_names.size(),
                  why_not.c_str());
      for (const auto& name : gpu_names) skipped.emplace_back(name, why_not);
      if (cpu_names.empty()) {
        record_completion(skipped);
        return 77;
      }
      // Run only the [cpu] cases: a comma-separated list of exact names is an OR in Catch2.
      Catch::ConfigData narrowed = session.configData();
      std::string spec;
      for (const auto& name : cpu_names) spec += (spec.empty() ? "" : ",") + name;
      narrowed.testsOrTags = {spec};
      session.useConfigData(narrowed);
      skipped_gpu = true;
    }
  }

  if (!skipped_gpu && !cluster_names.empty()) {
    // Run only what can run here (as above for [gpu] cases).
    Catch::ConfigData narrowed = session.configData();
    std::string spec;
    for (const auto& list : {cpu_names, gpu_names}) {
      for (const auto& name : list) spec += (spec.empty() ? "" : ",") + name;
    }
    narrowed.testsOrTags = {spec};
    session.useConfigData(narrowed);
  }
  const int failed = session.run();
  record_completion(skipped);
  if (failed != 0) return 1;
  return skipped.empty() ? 0 : 77;
}

}  // namespace gpulab::testing
