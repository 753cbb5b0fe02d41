/// @file mpi.hpp
/// @brief Launching a distributed test: `mpirun -np W` with --oversubscribe (more ranks than
/// cores is fine for tests), --allow-run-as-root only when root, one output file per rank, a
/// time limit, and no process left behind.
#pragma once

#include <atomic>
#include <map>
#include <string>
#include <vector>

#include "base/lab_config.hpp"
#include "base/process.hpp"

namespace gpulab::cli {

struct MpiRun {
  ProcessResult process;                ///< mpirun itself
  std::vector<std::string> rank_output; ///< stdout + stderr of each rank, by rank
  std::vector<std::string> problems;    ///< what the launcher said went wrong, one line each
  std::vector<std::string> notes;       ///< what did not happen and is no fault of the run ("fault not injected: …")
  std::vector<std::string> leftovers;   ///< processes still running the program afterwards (then killed)
  std::map<int, std::string> rank_hosts; ///< across hosts: where each rank ran (mpirun --display-map); empty on one node
};

/// Each rank's host from mpirun's --display-map output ("Data for node: NAME …" then its
/// "Process rank: R" lines).
std::map<int, std::string> parse_display_map(const std::string& mpirun_output);

/// Places every mpirun from now on across a cluster of network namespaces (cluster.hpp:
/// cluster_mpirun_args: hosts, launcher, TCP) or a real one (--hostfile FILE). Empty: one node,
/// shared memory (the default). @p force_transport: OpenMPI's ob1 messaging is asked for (one
/// node and the namespaces, where the tests' assumptions are known to hold); false on a real
/// cluster, whose own choice (UCX on InfiniBand) stands.
void set_mpi_placement(std::vector<std::string> args, bool force_transport = true);

/// A fault injected while a distributed run is under way (grade --fault ...): a node's link cut
/// (`link-down:NODE@SECONDS`, in this machine's namespaces only, --nodes N: its bridge-side veth
/// set down, and up again afterwards) or a rank killed (`kill:RANK@SECONDS`: SIGKILL to the
/// process of the run whose OMPI_COMM_WORLD_RANK is RANK, on whichever host runs it).
struct MpiFault {
  enum class Kind { kLinkDown, kKill };
  Kind kind = Kind::kKill;
  int target = 0;      ///< the node (link-down) or the rank (kill)
  double at_s = 0;     ///< seconds after mpirun starts
  std::string link;    ///< link-down: the interface to set down (the cluster's bridge side of the node)
  std::string node;    ///< link-down: the node's name, for the report
};
/// Parses "link-down:1@3.5" or "kill:2@1"; nullopt-like (target < 0) with @p error set when wrong.
MpiFault parse_fault(const std::string& text, std::string& error);
/// How the grader reaches the other hosts of a real cluster, after a run and while one is on:
/// over ssh to each host (grade --hostfile) or through srun inside the allocation, one task per
/// node (--launcher slurm). kNone: this host only (the default; the cluster of namespaces shares
/// this machine's processes).
struct RemoteHosts {
  enum class Via { kNone, kSsh, kSrun };
  Via via = Via::kNone;
  std::vector<std::string> hosts;  ///< ssh: the hostfile's hosts; srun: the allocation's nodes
};
/// Every mpirun from now on places ranks on @p remote's hosts too: after each run each host is
/// asked for processes that carry the run's marker, which are killed and reported "HOST:PID"
/// among the leftovers, and a `kill:RANK` fault finds its rank on whichever host runs it.
void set_mpi_remote_hosts(RemoteHosts remote);

/// What one host printed for run_on_hosts.
struct HostAnswer {
  std::string host;
  std::string output;
};
/// Runs the shell @p script on every host of @p remote (ssh: every host at once, 20 s; srun: one
/// task per node at once, 30 s), under `timeout 15` there. @p script must end with `echo done`: a
/// host whose output has no such line did not run it, and is said in @p unasked with why. Stops
/// early (SIGTERM, then SIGKILL) when *@p stop turns true. Callable from any thread (the fault
/// injector asks while a run is on): it does not use run_process.
std::vector<HostAnswer> run_on_hosts(const RemoteHosts& remote, const std::string& script, std::vector<std::string>* unasked,
                                     const std::atomic<bool>* stop = nullptr);

/// The shell script that finds this host's processes whose environment holds
/// GPULAB_MPI_RUN=@p marker_value and, with @p kill_them, SIGKILLs them ("killed PID" each, else
/// "found PID"), then prints "done". Only processes on the host's own network count (the cluster
/// of namespaces shares one /proc: a process on another node's network is that node's); the others
/// are said as "other PID". For a rank (@p rank ≥ 0): only that rank's processes whose argv[0] is
/// @p program (so also a child of the rank that runs the same program, as a data loader's worker
/// may), others unsaid. "" when @p marker_value is not one of run_mpi's (digits and dashes) or
/// @p program is empty for a rank: nothing the remote shell could read as code.
std::string marked_kill_script(const std::string& marker_value, int rank = -1, const std::string& program = "", bool kill_them = true);

/// On each host of @p remote: the processes of run @p marker_value still there 2 s after a first
/// look found any (ORTE may still be ending them), killed; "HOST:PID" each. A host that could not
/// be asked, a marker that is not run_mpi's, or a marked process that every host saw on another
/// network (a container of its own: not touched) is said in @p unasked.
std::vector<std::string> remote_leftovers(const RemoteHosts& remote, const std::string& marker_value,
                                          std::vector<std::string>* unasked = nullptr);

/// Injects @p faults into every mpirun from now on (empty: none). A run with faults has a time
/// limit of the last fault's time + 20 s at most, so that a cut-off rank cannot hang the grade.
void set_mpi_faults(std::vector<MpiFault> faults);
/// The faults set now.
std::vector<MpiFault> mpi_faults();

/// The names mpirun exports to every rank (-x): those of @p env (what the grader adds for the
/// run) and every GPULAB_* of this process's environment (GPULAB_DIST_BACKEND and the like).
std::vector<std::string> mpi_exports(const std::map<std::string, std::string>& env);

/// The mpirun command line for @p ranks ranks running @p command, per-rank output under @p logs,
/// the variables named in @p exports passed on to every rank (-x NAME).
std::vector<std::string> mpirun_argv(int ranks, const fs::path& logs, const std::vector<std::string>& command,
                                     const std::vector<std::string>& exports = {});

/// Runs it with @p options (time limit, environment); collects each rank's output and the
/// launcher's complaints ("rank 1 was killed by signal 9", "MPI_Abort on rank 2").
MpiRun run_mpi(int ranks, const fs::path& logs, const std::vector<std::string>& command,
               const ProcessOptions& options);

/// The MPI transport that ran, from OpenMPI's own selection messages in a rank's output (run with
/// OMPI_MCA_pml_base_verbose and OMPI_MCA_btl_base_verbose at 10): "pml ob1, btl tcp, vader",
/// "pml ucx", or "" when it said nothing.
std::string transport_that_ran(const std::string& output);

/// Lines of @p launcher_output that say which rank failed and how, shortened.
std::vector<std::string> launcher_problems(const std::string& launcher_output);

/// Processes (not zombies) whose command line mentions @p program, other than this one.
std::vector<int> processes_running(const std::string& program);

/// `gpulab-cli mpirun`: what CTest runs for each distributed case. Prints each rank's output
/// under a "[rank r]" prefix and returns mpirun's exit code (124 after a time-out).
int mpirun_command(int ranks, double timeout_s, const std::string& logs, const std::vector<std::string>& command);

}  // namespace gpulab::cli
