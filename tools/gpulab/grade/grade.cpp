/// @file grade.cpp
/// @brief The grading pipeline: find the lab, choose the sources, run the stages (grade.hpp).
#include "grade/grade.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "grade/build.hpp"
#include "grade/grade_stages.hpp"
#include "grade/points.hpp"
#include "run/cluster.hpp"
#include "run/mpi.hpp"

namespace gpulab::cli {
namespace {

std::uint64_t fresh_seed() {
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 20) ^ device();
}

/// Chooses the sources, prints the header, prepares the log folder and hashes the trees grading
/// must leave as they are; false when it cannot grade.
bool prepare(GradeInputs& in, TreesBefore& before, GradeResult& result) {
  std::cout << "gpulab grade " << in.lab.number << " · " << in.lab.title << '\n';
  if (const LabPart* part = in.lab.part(in.options.part)) {
    std::cout << "  part     " << in.options.part << " of " << in.lab.parts.size() << ": " << part->title << '\n';
  }
  const BuildInfo& b = in.lab.build;
  if (!b.configured) {
    std::cout << "  the build tree " << in.paths.build << " is not configured: run ./gpulab (it configures)\n";
    return false;
  }
  if (!b.buildable) {
    result.not_run_reason = b.reason;
    Check c = Check::failure("build", Kind::kBuild, "lab " + in.lab.number + " cannot be built here: " + b.reason,
                             "run ./gpulab doctor to see what is missing");
    c.status = Status::kNotRun;
    result.card.add(c);
    return false;
  }
  const GradeOptions& o = in.options;
  in.sources = o.solutions ? Sources::kReference : !o.submission.empty() ? Sources::kSubmission : Sources::kLab;
  in.variant = o.solutions ? "ref" : !o.submission.empty() ? "sub" : "lab";
  in.source_dir = o.solutions ? in.lab.solutions : !o.submission.empty() ? fs::absolute(o.submission) : in.lab.labs;
  in.compiled_dir = in.sources == Sources::kSubmission ? b.submission_dir : in.source_dir;
  result.sources = fs::relative(in.source_dir, in.paths.root).string();
  if (result.sources.rfind("..", 0) == 0) result.sources = in.source_dir.string();
  const char* role = in.sources == Sources::kLab ? "  (your working copy)" : in.sources == Sources::kReference ? "  (reference)" : "  (submission)";
  std::cout << "  sources  " << result.sources << role << '\n'
            << "  seed     " << in.seed << "  (reproduce: ./gpulab grade " << in.lab.number << " --seed " << in.seed << ")\n";
  in.log_dir = in.paths.build / "grade" / in.lab.number;
  fs::remove_all(in.log_dir);
  fs::create_directories(in.log_dir);
  std::cout << "  logs     " << fs::relative(in.log_dir, in.paths.root).string() << "/\n\n";
  // What grading must leave as it is, hashed before any learner code runs (stage_integrity).
  before.labs = hash_tree(in.lab.labs);
  before.solutions = hash_tree(in.lab.solutions);
  if (in.sources == Sources::kSubmission) before.submission = hash_tree(in.source_dir);
  return true;
}

/// Why --nodes cannot be honoured ("" when it can): a lab that is not distributed, no cluster
/// of that size up, another link rate. When it can, every mpirun from now on goes across it.
std::string cluster_problem(const Paths& paths, const GradeOptions& options, const LabConfig& lab) {
  if (!lab.distributed()) return "--nodes is for the distributed labs (07 onwards): lab " + lab.number + " runs in one process";
  if (geteuid() != 0) {
    return "the ranks are launched into network namespaces (ip netns exec), which needs root: sudo ./gpulab grade " + lab.number + " --nodes " +
           std::to_string(options.nodes);
  }
  const ClusterPlan plan = saved_cluster(paths);
  if (plan.nodes != options.nodes) {
    return "no cluster of " + std::to_string(options.nodes) + " nodes is up (" +
           (plan.nodes > 0 ? std::to_string(plan.nodes) + " are" : "none is") + "): sudo ./gpulab cluster up --nodes " +
           std::to_string(options.nodes) + (options.link_rate.empty() ? "" : " --link-rate " + options.link_rate);
  }
  if (!options.link_rate.empty() && options.link_rate != plan.link_rate) {
    return "the cluster's links are " + (plan.link_rate.empty() ? std::string("unshaped") : plan.link_rate) + ", not " + options.link_rate +
           ": sudo ./gpulab cluster up --nodes " + std::to_string(options.nodes) + " --link-rate " + options.link_rate + " remakes it";
  }
  std::vector<MpiFault> faults;
  for (const std::string& text : options.faults) {
    std::string error;
    MpiFault f = parse_fault(text, error);
    if (f.target < 0) return error;
    if (f.kind == MpiFault::Kind::kLinkDown) {
      if (f.target >= plan.nodes) return "--fault " + text + ": the cluster has nodes 0 to " + std::to_string(plan.nodes - 1);
      f.link = plan.bridge_side(f.target);
      f.node = plan.node(f.target);
    }
    faults.push_back(f);
  }
  set_mpi_faults(faults);
  set_mpi_placement(cluster_mpirun_args(plan, cluster_agent_path(paths)));
  return "";
}

/// --fault on a real cluster (--hostfile, --launcher slurm): kill:RANK@SECONDS only, the rank
/// found by the run's marker on whichever host runs it; "" when every fault can be injected there.
std::string set_real_cluster_faults(const GradeOptions& options) {
  std::vector<MpiFault> faults;
  for (const std::string& text : options.faults) {
    std::string error;
    const MpiFault f = parse_fault(text, error);
    if (f.target < 0) return error;
    if (f.kind == MpiFault::Kind::kLinkDown) {
      return "--fault " + text + ": a real cluster's links are not the grader's to cut (link-down is for this machine's namespaces, --nodes N); kill:RANK@SECONDS works here";
    }
    faults.push_back(f);
  }
  set_mpi_faults(faults);
  return "";
}

/// Why --hostfile cannot be honoured ("" when it can): a lab that is not distributed, --nodes as
/// well, a hostfile that cannot be read, a host that does not answer over ssh or does not see the
/// course's tree. When it can, every mpirun from now on goes across the hosts. @p hosts: the hosts.
std::string hostfile_setup(const Paths& paths, const GradeOptions& options, const LabConfig& lab, std::vector<HostfileHost>& hosts) {
  if (!lab.distributed()) return "--hostfile is for the distributed labs (07 onwards): lab " + lab.number + " runs in one process";
  if (options.nodes > 0) return "--hostfile and --nodes are two launchers (a real cluster's hosts, this machine's namespaces): choose one";
  if (const std::string faults = set_real_cluster_faults(options); !faults.empty()) return faults;
  std::string text, error;
  try {
    text = read_text(options.hostfile);
  } catch (const std::exception&) {
    return "cannot read the hostfile " + options.hostfile;
  }
  hosts = parse_hostfile(text, error);
  if (hosts.empty()) return "the hostfile " + options.hostfile + ": " + error;
  // The records come home through the course's tree, which every host must see: a file of this
  // grade's, read back on each host over ssh.
  const fs::path probe = paths.build / "grade" / (".hostfile-probe-" + std::to_string(getpid()));
  fs::create_directories(probe.parent_path());
  write_text(probe, probe.filename().string() + "\n");
  const std::string problem = hostfile_problem(hosts, probe);
  fs::remove(probe);
  if (!problem.empty()) return problem;
  set_mpi_placement(hostfile_mpirun_args(fs::absolute(options.hostfile)), false);
  RemoteHosts remote;
  remote.via = RemoteHosts::Via::kSsh;
  for (const HostfileHost& h : hosts) remote.hosts.push_back(h.name);
  set_mpi_remote_hosts(remote);
  return "";
}

/// The launcher a grade uses: what --launcher says, else slurm inside an allocation
/// (SLURM_JOB_ID), hostfile with --hostfile, local otherwise; "" with @p problem set when they disagree.
std::string chosen_launcher(const GradeOptions& options, std::string& problem) {
  if (options.launcher == "hostfile" && options.hostfile.empty()) problem = "--launcher hostfile needs --hostfile FILE (an OpenMPI hostfile)";
  if (!options.hostfile.empty() && !options.launcher.empty() && options.launcher != "hostfile") {
    problem = "--hostfile goes with --launcher hostfile, not " + options.launcher;
  }
  if (!problem.empty()) return "";
  if (!options.launcher.empty()) return options.launcher;
  if (!options.hostfile.empty()) return "hostfile";
  // Inside an allocation of several nodes: Slurm. One node (a batch job with a GPU, a CI runner
  // Slurm started) grades here, sandboxed, as anywhere else.
  const char* nodes = std::getenv("SLURM_NNODES");
  if (options.nodes == 0 && std::getenv("SLURM_JOB_ID") != nullptr && nodes != nullptr && std::atoi(nodes) > 1) return "slurm";
  return "local";
}

/// Why --launcher slurm cannot be honoured ("" when it can): no allocation, fewer tasks in it than
/// the widest run asks, srun failing (munge, slurmd), or a node that does not see the course's tree.
/// When it can, every mpirun from now on runs inside the allocation (OpenMPI starts its daemons
/// through Slurm). @p where: the allocation, for the scorecard.
std::string slurm_setup(const Paths& paths, const GradeOptions& options, const LabConfig& lab, std::string& where) {
  if (!lab.distributed()) return "--launcher slurm is for the distributed labs (07 onwards): lab " + lab.number + " runs in one process";
  if (options.nodes > 0) return "--launcher slurm runs in your allocation, not in this machine's namespaces (--nodes)";
  const char* job = std::getenv("SLURM_JOB_ID");
  if (job == nullptr) {
    return "not inside a Slurm allocation (no SLURM_JOB_ID): salloc -N 2 --ntasks-per-node=4 first, then ./gpulab grade " + lab.number +
           " --launcher slurm in the shell it gives";
  }
  const int tasks = slurm_task_count(std::getenv("SLURM_NTASKS"), std::getenv("SLURM_TASKS_PER_NODE"));
  const std::vector<int> widths = options.ranks.empty() ? lab.mpi_ranks : options.ranks;
  const int widest = widths.empty() ? 1 : *std::max_element(widths.begin(), widths.end());
  if (tasks > 0 && tasks < widest) {
    return "the allocation has " + std::to_string(tasks) + " task" + (tasks == 1 ? "" : "s") + " and lab " + lab.number + " runs up to " +
           std::to_string(widest) + " ranks: salloc -n " + std::to_string(widest) + " (or grade fewer: --ranks " + std::to_string(tasks) + ")";
  }
  // The records come home through the course's tree: every node reads a file of this grade's.
  const fs::path probe = paths.build / "grade" / (".slurm-probe-" + std::to_string(getpid()));
  fs::create_directories(probe.parent_path());
  write_text(probe, probe.filename().string() + "\n");
  const char* nodes_env = std::getenv("SLURM_NNODES");
  const std::string nodes = nodes_env != nullptr ? nodes_env : "1";
  ProcessOptions o;
  o.timeout_s = 60;
  // One task per node (-n as many as nodes, whatever the allocation's own task count), each line tagged.
  const ProcessResult r = run_process({"srun", "-N", nodes, "-n", nodes, "--ntasks-per-node=1", "sh", "-c",
                                       "echo \"gpulab-probe $(hostname) $(cat " + shell_quote(probe.string()) + ")\""}, o);
  fs::remove(probe);
  std::string said = utf8_prefix(r.output, 300);
  while (!said.empty() && std::isspace(static_cast<unsigned char>(said.back()))) said.pop_back();
  if (!r.exited(0)) return "srun across the allocation failed (" + r.describe() + "): " + said + " (is munge running on every node? sinfo shows the nodes)";
  std::istringstream lines(r.output);
  int seen = 0;
  std::string hosts;
  RemoteHosts remote;
  remote.via = RemoteHosts::Via::kSrun;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("gpulab-probe ", 0) != 0) continue;  // srun's own notes
    line.erase(0, 13);
    if (line.find(probe.filename().string()) == std::string::npos) {
      return "a node of the allocation does not see " + probe.string() + " (" + line +
             "): the ranks write their records into the grade's folder, so the course's tree must lie on a filesystem every node mounts";
    }
    hosts += (hosts.empty() ? "" : ", ") + line.substr(0, line.find(' '));
    remote.hosts.push_back(line.substr(0, line.find(' ')));
    ++seen;
  }
  if (seen != std::atoi(nodes.c_str())) return "srun answered from " + std::to_string(seen) + " of " + nodes + " nodes: " + said;
  where = std::string("allocation ") + job + ": " + nodes + " node" + (nodes == "1" ? "" : "s") + " (" + hosts + "), " + std::to_string(tasks) + " tasks";
  if (const std::string faults = set_real_cluster_faults(options); !faults.empty()) return faults;
  set_mpi_placement({}, false);
  set_mpi_remote_hosts(remote);
  return "";
}

void measure_pair(const GradeInputs& in, Check& c, const std::string& between);

/// The launcher a --hostfile grade ran under, its hosts and what is and is not checked there (an INFO line).
Check hostfile_check(const GradeInputs& in, const std::vector<HostfileHost>& hosts) {
  const GradeOptions& options = in.options;
  Check c;
  std::string list;
  int slots = 0;
  for (const HostfileHost& h : hosts) {
    list += (list.empty() ? "" : ", ") + h.name + " (" + std::to_string(h.slots) + " slot" + (h.slots == 1 ? "" : "s") + ")";
    slots += h.slots;
  }
  c.name = "launcher: mpirun --hostfile " + options.hostfile + " over ssh: " + std::to_string(hosts.size()) + " host" + (hosts.size() == 1 ? "" : "s") +
           ", ranks round-robin by host";
  c.kind = Kind::kStructure;
  c.where = Where::kCpu;
  c.status = Status::kInfo;
  c.details.push_back("hosts: " + list + "; " + std::to_string(slots) + " slots in all (more ranks than slots oversubscribe them)");
  c.details.push_back("the transport is the cluster's own choice (no --mca pml or btl forced); each rank's environment from the grader is exported (-x)");
  c.details.push_back("the ranks' records come home through the course's tree, which every host was seen to mount");
  c.details.push_back("after every run each host is asked over ssh for processes carrying the run's marker: any is killed and reported");
  c.data["hosts"] = hosts.size();
  c.data["slots"] = slots;
  if (hosts.size() >= 2) measure_pair(in, c, "between " + hosts[0].name + " and " + hosts[1].name + " (ranks 0 and 1)");
  return c;
}

/// gpulab-pingpong on ranks 0 and 1 (on two nodes or hosts, round-robin), with OpenMPI saying
/// which transport it chose: α, β, an exact all-reduce of integers, and the transport, into @p c
/// (a failure there fails @p c). @p between names the pair for the lines.
void measure_pair(const GradeInputs& in, Check& c, const std::string& between) {
  const fs::path pingpong = in.paths.build / "bin" / "gpulab-pingpong";
  // Built on demand (./gpulab builds only the CLI); the build is incremental, so this costs a
  // moment once. Without MPI the target does not exist and the build says so.
  const BuildResult built = build_targets(in.paths, {"gpulab-pingpong"});
  if (!built.ok || !fs::exists(pingpong)) {
    // Ninja says "unknown target", Make "No rule to make target": the target exists only with MPI.
    const bool no_target = built.output.find("unknown target") != std::string::npos || built.output.find("No rule to make target") != std::string::npos;
    c.details.push_back("gpulab-pingpong could not be built" +
                        std::string(no_target ? ": this build found no MPI (./gpulab doctor)" : ": " + utf8_prefix(built.diagnostics, 300)));
    return;
  }
  ProcessOptions o;
  o.timeout_s = 120;
  o.env["OMPI_MCA_pml_base_verbose"] = "10";  // each rank says which messaging layer and transports it chose
  o.env["OMPI_MCA_btl_base_verbose"] = "10";
  const std::vector<MpiFault> faults = mpi_faults();  // the links are measured as they are, without the faults
  set_mpi_faults({});
  const MpiRun run = run_mpi(2, in.log_dir / "pingpong", {pingpong.string()}, o);
  set_mpi_faults(faults);
  c.seconds = run.process.seconds;
  for (const MpiFault& f : faults) {
    char text[120];
    std::snprintf(text, sizeof text, "every distributed run below: %s %d at %.1f s", f.kind == MpiFault::Kind::kKill ? "rank" : "the link of node",
                  f.target, f.at_s);
    c.details.push_back(std::string("fault injected into ") + text + (f.kind == MpiFault::Kind::kKill ? " is killed" : " is cut"));
  }
  const std::string out = run.rank_output.empty() ? "" : run.rank_output[0];
  const std::size_t a = out.find("alpha_us "), b = out.find("beta_gbs ");
  if (!run.process.exited(0) || a == std::string::npos || b == std::string::npos) {
    c.status = Status::kFail;
    c.details.push_back("the ping-pong " + between + " failed (" + run.process.describe() + "): " + utf8_prefix(out, 600));
    for (const std::string& p : run.problems) c.details.push_back(p);
    return;
  }
  const double alpha = std::atof(out.c_str() + a + 9), beta = std::atof(out.c_str() + b + 9);
  char text[240];
  std::snprintf(text, sizeof text, "measured %s: alpha %.1f us (half a 1-byte round trip), beta %.3f GB/s at 64 MiB (t(n) = alpha + n / beta)",
                between.c_str(), alpha, beta);
  c.details.push_back(text);
  if (out.find("allreduce_exact ") != std::string::npos) c.details.push_back("an all-reduce of 8 MiB of integers across the two nodes: exact");
  const std::string transport = transport_that_ran(out);
  if (!transport.empty()) c.details.push_back("the transport OpenMPI chose (its own selection messages): " + transport);
  c.data["alpha_us"] = alpha;
  c.data["beta_gbs"] = beta;
  c.data["transport"] = transport;
}

/// The topology and the links' α and β, measured by gpulab-pingpong between the first two
/// nodes (an INFO line: what every distributed case below ran on).
Check cluster_check(const GradeInputs& in) {
  const ClusterPlan plan = saved_cluster(in.paths);
  Check c;
  c.name = "cluster: " + std::to_string(plan.nodes) + " nodes (" + plan.node(0) + " …), links " + (plan.link_rate.empty() ? "unshaped" : plan.link_rate) +
           ", ranks round-robin by node over TCP" + (plan.with == "ssh" ? ", started over ssh (an sshd in each node)" : "");
  c.kind = Kind::kStructure;
  c.where = Where::kCpu;
  c.status = Status::kInfo;
  c.data["nodes"] = plan.nodes;
  c.data["link_rate"] = plan.link_rate;
  if (plan.nodes < 2) {
    c.details.push_back("one node: no link to measure");
    return c;
  }
  measure_pair(in, c, "between " + plan.node(0) + " and " + plan.node(1));
  if (c.status == Status::kFail) c.hints.push_back("./gpulab cluster status shows the nodes; ./gpulab cluster up --nodes N remakes them");
  return c;
}

}  // namespace

namespace {
/// Grades in one tree share it; a grade whose code under test runs unconfined (no sandbox: it
/// can write the tree) has it to itself, so that another grade's guard (every file the build
/// reads) never sees what that code wrote, nor puts it back from under it. Selftest's plants
/// that tamper with the tree on purpose run beside other labs' grades.
class TreeLock {
 public:
  TreeLock(const Paths& paths, bool alone) : fd_(open((paths.build / ".gpulab-tree.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ >= 0) {
      while (flock(fd_, alone ? LOCK_EX : LOCK_SH) != 0 && errno == EINTR) {
      }
    }
  }
  ~TreeLock() {
    if (fd_ >= 0) close(fd_);
  }
  TreeLock(const TreeLock&) = delete;
  TreeLock& operator=(const TreeLock&) = delete;

 private:
  int fd_;
};
}  // namespace

nlohmann::json GradeResult::to_json() const {
  nlohmann::json j = card.to_json();
  j["lab"] = lab;
  j["sources"] = sources;
  j["seed"] = seed;
  if (!not_run_reason.empty()) j["not_run_reason"] = not_run_reason;
  if (!confinement.is_null()) j["confinement"] = confinement;
  return j;
}

GradeResult grade(const Paths& paths, const GradeOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  GradeResult result{1, "", "", 0, Scorecard(options.quiet), "", {}};
  result.card.set_verbose(options.verbose);
  const std::optional<LabConfig> lab = find_lab(paths, options.lab);
  if (!lab) {
    std::cout << "gpulab grade: no lab \"" << options.lab << "\". Labs:";
    for (const LabConfig& l : discover_labs(paths)) std::cout << " " << l.number;
    std::cout << "\n";
    return result;
  }
  if (options.part != 0 && lab->part(options.part) == nullptr) {
    std::cout << "gpulab grade " << lab->number << " --part " << options.part << ": "
              << (lab->parts.empty() ? "lab " + lab->number + " is graded whole (it has no parts)"
                                     : "lab " + lab->number + " has parts 1 to " + std::to_string(lab->parts.size()))
              << "\n";
    result.exit_code = 2;
    return result;
  }
  if (options.nodes > 0) {
    const std::string problem = cluster_problem(paths, options, *lab);
    if (!problem.empty()) {
      std::cout << "gpulab grade " << lab->number << " --nodes " << options.nodes << ": " << problem << "\n";
      result.exit_code = 2;
      return result;
    }
  }
  std::string launcher_problem;
  const std::string launcher = lab->distributed() ? chosen_launcher(options, launcher_problem) : "local";
  if (!launcher_problem.empty()) {
    std::cout << "gpulab grade " << lab->number << ": " << launcher_problem << "\n";
    result.exit_code = 2;
    return result;
  }
  if (!options.faults.empty() && options.nodes == 0 && launcher == "local") {
    std::cout << "gpulab grade: --fault needs ranks on several hosts: --nodes N (this machine's namespaces: ./gpulab cluster up), --hostfile FILE "
                 "or --launcher slurm\n";
    result.exit_code = 2;
    return result;
  }
  std::string allocation;
  if (launcher == "slurm") {
    const std::string problem = slurm_setup(paths, options, *lab, allocation);
    if (!problem.empty()) {
      std::cout << "gpulab grade " << lab->number << " --launcher slurm: " << problem << "\n";
      result.exit_code = 2;
      return result;
    }
  }
  std::vector<HostfileHost> hosts;
  if (!options.hostfile.empty()) {
    const std::string problem = hostfile_setup(paths, options, *lab, hosts);
    if (!problem.empty()) {
      std::cout << "gpulab grade " << lab->number << " --hostfile " << options.hostfile << ": " << problem << "\n";
      result.exit_code = 2;
      return result;
    }
  }
  const TreeLock tree(paths, !options.sandbox || options.nodes > 0 || launcher != "local" || !sandbox_available());
  GradeOptions resolved = options;  // the launcher as chosen, for the stages (the sandbox's decision)
  resolved.launcher = launcher;
  GradeInputs in{paths, resolved, *lab};
  in.seed = options.seed ? *options.seed : fresh_seed();
  result.lab = lab->slug;
  result.seed = in.seed;
  TreesBefore before;
  if (prepare(in, before, result)) {
    if (options.nodes > 0) result.card.add(cluster_check(in));
    if (!hosts.empty()) result.card.add(hostfile_check(in, hosts));
    if (launcher == "slurm") {
      Check c;
      c.name = "launcher: mpirun inside the Slurm " + allocation;
      c.kind = Kind::kStructure;
      c.where = Where::kCpu;
      c.status = Status::kInfo;
      c.details.push_back("OpenMPI starts its daemons through Slurm (srun); the transport is the cluster's own choice (no --mca pml or btl forced)");
      c.details.push_back("the ranks' records come home through the course's tree, which every node was seen to mount");
      c.details.push_back("after every run each node is asked through srun (--overlap, one task per node) for processes carrying the run's marker: any is killed and reported");
      const char* nodes = std::getenv("SLURM_NNODES");
      if (nodes != nullptr && std::atoi(nodes) >= 2) measure_pair(in, c, "between ranks 0 and 1 (on two nodes)");
      result.card.add(c);
    }
    // The pipeline: each stage takes what the earlier ones produced; the first that cannot go on
    // ends it, and the integrity check always closes it.
    LearnerRuns runs;
    Scorecard& card = result.card;
    if (stage_sources(in, card)) {
      if (std::optional<Built> built = stage_build(in, runs, card)) {
        const Diagnosis diagnosis = stage_diagnosis(in, card);
        if (const std::optional<Correctness> correct = stage_correctness(in, *built, runs, card)) {
          if (stage_sanitizer(in, *built, *correct, runs, card) && stage_profile(in, *built, runs, card)) {
            stage_performance(in, *built, diagnosis, *correct, runs, card);
          }
        }
        if (!built->gpu_missing.empty()) result.not_run_reason = built->gpu_missing;
        result.confinement = runs.confinement().to_json();
      }
    }
    stage_integrity(in, before, runs, card);
  }
  result.exit_code = result.card.exit_code();
  result.card.print_summary(result.not_run_reason);
  const nlohmann::json card = result.to_json();
  if (!options.json_path.empty()) write_text(options.json_path, card.dump(2) + "\n");
  // Points (lab.json "points"; grade/points.hpp), and the formats courses read.
  const PointsResult points = score_scorecard(card, lab->points);
  std::cout << "  points: " << points.score << " of " << points.max_score
            << (points.integrity_failed ? " (the integrity check failed: no check earns points)" : "")
            << "  (lab.json \"points\"; --format gradescope|classroom|junit --out FILE writes them)\n";
  if (options.format == "gradescope") {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    write_text(options.out_path, gradescope_results(card, points, seconds).dump(2) + "\n");
  } else if (options.format == "classroom") {
    write_text(options.out_path, classroom_results(points).dump(2) + "\n");
  } else if (options.format == "junit") {
    write_text(options.out_path, junit_report(card, points));
  }
  return result;
}

}  // namespace gpulab::cli
