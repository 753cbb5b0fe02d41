/// @file cluster.hpp
/// @brief A cluster on one machine (`gpulab cluster up|down|status`, `gpulab grade NN --nodes N`):
/// N "nodes" that are Linux network namespaces, each joined to one bridge by a veth pair, every
/// link shaped by `tc qdisc ... tbf rate R` on both ends (this kernel has tbf but no netem: the
/// latency is what the stack has). OpenMPI then places ranks across them with its rsh launcher
/// pointed at `ip netns exec` (plm_rsh_agent) and talks over its TCP transport on the bridge's
/// private subnet — real TCP, a real rate limit, on one machine.
///
/// Everything is named with one prefix ("gpulab-br", "gpulab-n0", "gpulab-v0" on the bridge's
/// side, "gpulab-e0" in the node) so that `down` finds and removes exactly what `up` made, also
/// after a crash, and nothing else. The only addresses used are the subnet's, assigned inside the
/// namespaces this creates. Needs root (CAP_NET_ADMIN).
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "base/paths.hpp"

namespace gpulab::cli {

/// What `cluster up` makes.
struct ClusterPlan {
  int nodes = 2;
  std::string link_rate;    ///< tc's rate, e.g. "1gbit"; "" leaves the links unshaped
  int ranks_per_node = 1;   ///< MPI slots per node
  std::string prefix = "gpulab";
  std::string subnet = "10.213.0";  ///< a /24: the bridge is .1, node i is .(10 + i)
  /// How mpirun reaches the nodes: "" through `ip netns exec` (the agent script); "ssh": an sshd
  /// in each node (a host key and a user key made for the cluster), mpirun over `ssh` with a
  /// hostfile, the environment exported with -x — the way a cluster launches; "slurm": Slurm's
  /// daemons (munged and slurmctld on the bridge's address, a slurmd in each node), for
  /// `salloc -N … ./gpulab grade NN --launcher slurm`, where mpirun starts its daemons by srun.
  std::string with;

  std::string controller() const { return prefix + "-ctl"; }  ///< slurmctld's hostname (its address: the bridge's, .1)
  /// slurmctld's port, in this machine's own network: 6900 + the subnet's third number, so that
  /// two clusters (and a real slurmctld on 6817) never share it. Each slurmd has a network of its own.
  int slurmctld_port() const { return 6900 + std::atoi(subnet.substr(subnet.rfind('.') + 1).c_str()); }

  std::string bridge() const { return prefix + "-br"; }
  std::string node(int i) const { return prefix + "-n" + std::to_string(i); }
  std::string bridge_side(int i) const { return prefix + "-v" + std::to_string(i); }
  std::string node_side(int i) const { return prefix + "-e" + std::to_string(i); }
  std::string address(int i) const { return subnet + "." + std::to_string(10 + i); }
  std::string cidr() const { return subnet + ".0/24"; }
};

/// "" when @p plan can be made (1 to 64 nodes, a rate tc understands such as 100mbit or 1gbit,
/// 1 to 64 ranks per node), else why not.
std::string check_plan(const ClusterPlan& plan);

/// A tc rate ("1gbit", "100mbit", "2.5gbit"; decimal prefixes, as tc's) in bytes per second; 0
/// for "" (unshaped) or a form check_plan refuses.
double link_rate_bytes_per_s(const std::string& rate);

/// The commands (argv each) that make @p plan from nothing, in order.
std::vector<std::vector<std::string>> cluster_up_commands(const ClusterPlan& plan);

/// What exists now under a prefix.
struct ClusterState {
  std::vector<std::string> namespaces;  ///< "gpulab-n0", ...
  std::vector<std::string> links;       ///< interfaces in the root namespace: the bridge, "gpulab-v0", ...
  bool empty() const { return namespaces.empty() && links.empty(); }
};

/// The names in `ip netns list` and `ip -o link show` output that carry @p prefix ("prefix-…").
ClusterState parse_cluster_state(const std::string& prefix, const std::string& netns_list, const std::string& link_list);
/// Asks the kernel (ip netns list, ip -o link show).
ClusterState discover_cluster(const std::string& prefix);

/// The commands that remove everything in @p state: the namespaces (their veth ends go with
/// them), then any link left in the root namespace. Killing the processes inside each namespace
/// first (ip netns pids) is done by cluster_down itself, not by a command here.
std::vector<std::vector<std::string>> cluster_down_commands(const ClusterState& state);

/// The arguments mpirun needs to run @p ranks ranks across the cluster of @p plan, round-robin
/// by node (rank r on node r mod N, so that ring neighbours sit on different nodes), launched
/// through @p agent (or, for a plan `with` ssh, over ssh with the hostfile and client
/// configuration in the agent's folder's ssh/), talking TCP on the cluster's subnet (shared
/// memory between ranks of one node).
std::vector<std::string> cluster_mpirun_args(const ClusterPlan& plan, const fs::path& agent);

/// The launcher script OpenMPI runs as `agent <node> <command …>`: the command inside the node.
std::string cluster_agent_script();

/// With --with ssh: the files `up` writes under the cluster's folder (ssh/): each node's sshd
/// configuration, the client's (`ssh -F` it: the node names, the user key, no host-key prompts)
/// and the hostfile ("gpulab-n0 slots=R" a line).
std::string cluster_sshd_config(const ClusterPlan& plan, int node, const fs::path& ssh_dir);
std::string cluster_ssh_config(const ClusterPlan& plan, const fs::path& ssh_dir);
std::string cluster_hostfile(const ClusterPlan& plan);

/// With --with slurm: the slurm.conf `up` writes under the cluster's folder (slurm/): the
/// controller on the bridge's address, each node with its address and @p cpus, one partition
/// over all, munge authentication through @p slurm_dir's socket, no cgroup confinement
/// (proctrack/linuxproc, task/none), every state, spool, pid and log file under @p slurm_dir.
std::string cluster_slurm_conf(const ClusterPlan& plan, const fs::path& slurm_dir, int cpus);

/// `up`: makes the plan (after removing what a previous one left), writes the plan and the agent
/// under .gpulab/cluster/, prints what it made. `down`: kills every process in the namespaces,
/// removes everything with the prefix, checks nothing is left. `status`: what exists. Returns the
/// exit code (2 without root: nothing is done, and it says what to run).
int cluster_command(const Paths& paths, const std::string& action, const ClusterPlan& plan);

// --- a real cluster: grade NN --hostfile FILE -------------------------------------------------

/// One line of an OpenMPI hostfile: "node07 slots=4" (slots 1 when not said).
struct HostfileHost {
  std::string name;
  int slots = 1;
};
/// The hosts of an OpenMPI hostfile's text (comments after #, blank lines, "slots=N"; other
/// keys such as max_slots are left to mpirun); empty with @p error set when none or malformed.
std::vector<HostfileHost> parse_hostfile(const std::string& text, std::string& error);

/// The tasks of a Slurm allocation, as OpenMPI counts its slots there: SLURM_NTASKS (@p ntasks)
/// when salloc was given -n, else the sum of SLURM_TASKS_PER_NODE (@p per_node, "2(x3),1": 2 on
/// each of 3 nodes, then 1). 0 when neither says (nullptr or unreadable).
int slurm_task_count(const char* ntasks, const char* per_node);

/// The ssh command gpulab probes each host with: `ssh`, the words of OMPI_MCA_plm_rsh_args (what
/// mpirun's own launcher will pass), BatchMode and a 5 s connect timeout (never a prompt, never a hang).
std::vector<std::string> probe_ssh_argv(const std::string& host, const std::string& remote_command);

/// @p text as one word for a POSIX shell: single-quoted, a ' inside written '\''.
std::string shell_quote(const std::string& text);

/// Before a grade over a hostfile: "" when every host answers over ssh without a password and
/// sees @p shared (a file in the grade's folder: the rule is that the grade's folder lies on a
/// filesystem every host mounts, as home folders do on most clusters — the ranks write their
/// records there); else one line saying which host and how to fix it.
std::string hostfile_problem(const std::vector<HostfileHost>& hosts, const fs::path& shared);

/// mpirun's arguments for a hostfile: its hosts, ranks round-robin by host. The transport is the
/// cluster's own (no --mca pml/btl).
std::vector<std::string> hostfile_mpirun_args(const fs::path& hostfile);

/// The plan `up` saved (nodes, link rate, ranks per node), or nullopt-like: nodes == 0 when there is
/// none or its namespaces are gone.
ClusterPlan saved_cluster(const Paths& paths);
/// Where `up` wrote the agent script.
fs::path cluster_agent_path(const Paths& paths);

}  // namespace gpulab::cli
