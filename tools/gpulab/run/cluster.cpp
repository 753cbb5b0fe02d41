/// @file cluster.cpp
/// @brief Network namespaces as the nodes of a cluster (cluster.hpp).
#include "run/cluster.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "base/files.hpp"
#include "base/process.hpp"

namespace gpulab::cli {
namespace {

using Argv = std::vector<std::string>;

bool starts_with_prefix(const std::string& name, const std::string& prefix) { return name.rfind(prefix + "-", 0) == 0; }

/// Runs @p argv, quietly; its output and whether it succeeded.
ProcessResult quiet(const Argv& argv) {
  ProcessOptions o;
  o.timeout_s = 30;
  return run_process(argv, o);
}

std::string join(const Argv& argv) {
  std::string s;
  for (const std::string& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

fs::path cluster_dir(const Paths& paths) { return paths.state_dir() / "cluster"; }

/// Waits (up to 5 s) until every node's link reports carrier on the bridge's side — a veth is
/// "up" only once both ends are — so that the first launch never races the links; the links
/// still down, or "".
std::string wait_for_links(const ClusterPlan& p) {
  std::string down;
  for (int attempt = 0; attempt < 50; ++attempt) {
    down.clear();
    for (int i = 0; i < p.nodes; ++i) {
      const fs::path state = "/sys/class/net/" + p.bridge_side(i) + "/operstate";
      if (!fs::exists(state) || read_text(state).rfind("up", 0) != 0) down += " " + p.bridge_side(i);
    }
    if (down.empty()) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return down;
}

}  // namespace

std::string check_plan(const ClusterPlan& plan) {
  if (plan.nodes < 1 || plan.nodes > 64) return "--nodes must be 1 to 64 (got " + std::to_string(plan.nodes) + ")";
  if (plan.ranks_per_node < 1 || plan.ranks_per_node > 64) return "--ranks-per-node must be 1 to 64";
  if (!plan.with.empty() && plan.with != "ssh" && plan.with != "slurm") {
    return "--with \"" + plan.with + "\": the launcher to start is ssh or slurm (or none: ip netns exec)";
  }
  static const std::regex rate(R"(^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit|tbit)$)");
  if (!plan.link_rate.empty() && !std::regex_match(plan.link_rate, rate)) {
    return "--link-rate \"" + plan.link_rate + "\" is not a rate tc understands (e.g. 100mbit, 1gbit, 10gbit)";
  }
  return "";
}

double link_rate_bytes_per_s(const std::string& rate) {
  static const std::regex form(R"(^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit)$)");
  std::smatch m;
  if (!std::regex_match(rate, m, form)) return 0.0;
  const std::string unit = m[3];
  const double scale = unit == "bit" ? 1.0 : unit == "kbit" ? 1e3 : unit == "mbit" ? 1e6 : unit == "gbit" ? 1e9 : 1e12;
  return std::stod(m[1]) * scale / 8.0;
}

std::vector<Argv> cluster_up_commands(const ClusterPlan& p) {
  std::vector<Argv> c;
  c.push_back({"ip", "link", "add", p.bridge(), "type", "bridge"});
  c.push_back({"ip", "addr", "add", p.subnet + ".1/24", "dev", p.bridge()});
  c.push_back({"ip", "link", "set", p.bridge(), "up"});
  for (int i = 0; i < p.nodes; ++i) {
    const std::string ns = p.node(i), v = p.bridge_side(i), e = p.node_side(i);
    c.push_back({"ip", "netns", "add", ns});
    c.push_back({"ip", "link", "add", v, "type", "veth", "peer", "name", e});
    c.push_back({"ip", "link", "set", e, "netns", ns});
    c.push_back({"ip", "link", "set", v, "master", p.bridge()});
    c.push_back({"ip", "link", "set", v, "up"});
    c.push_back({"ip", "-n", ns, "addr", "add", p.address(i) + "/24", "dev", e});
    c.push_back({"ip", "-n", ns, "link", "set", e, "up"});
    c.push_back({"ip", "-n", ns, "link", "set", "lo", "up"});
    if (!p.link_rate.empty()) {
      // Both directions: the node's sending end inside it, the bridge's sending end outside.
      // burst 256 KiB keeps tbf from starving TCP at 1 Gbit/s and above; 100 ms of queue.
      c.push_back({"tc", "qdisc", "add", "dev", v, "root", "tbf", "rate", p.link_rate, "burst", "256kb", "latency", "100ms"});
      c.push_back({"ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", e, "root", "tbf", "rate", p.link_rate, "burst", "256kb", "latency", "100ms"});
    }
  }
  return c;
}

ClusterState parse_cluster_state(const std::string& prefix, const std::string& netns_list, const std::string& link_list) {
  ClusterState s;
  std::istringstream ns(netns_list);
  for (std::string line; std::getline(ns, line);) {
    const std::string name = line.substr(0, line.find(' '));
    if (starts_with_prefix(name, prefix)) s.namespaces.push_back(name);
  }
  // `ip -o link show`: "9: gpulab-v1@if8: <BROADCAST,…> …"
  std::istringstream links(link_list);
  for (std::string line; std::getline(links, line);) {
    std::istringstream fields(line);
    std::string index, name;
    fields >> index >> name;
    if (!name.empty() && name.back() == ':') name.pop_back();
    name = name.substr(0, name.find('@'));
    if (starts_with_prefix(name, prefix)) s.links.push_back(name);
  }
  return s;
}

ClusterState discover_cluster(const std::string& prefix) {
  return parse_cluster_state(prefix, quiet({"ip", "netns", "list"}).output, quiet({"ip", "-o", "link", "show"}).output);
}

std::vector<Argv> cluster_down_commands(const ClusterState& state) {
  std::vector<Argv> c;
  for (const std::string& ns : state.namespaces) c.push_back({"ip", "netns", "del", ns});
  for (const std::string& link : state.links) c.push_back({"ip", "link", "del", link});
  return c;
}

std::vector<std::string> cluster_mpirun_args(const ClusterPlan& p, const fs::path& agent) {
  std::string hosts;
  for (int i = 0; i < p.nodes; ++i) hosts += (i ? "," : "") + p.node(i) + ":" + std::to_string(p.ranks_per_node);
  // Two settings found by measurement (1 Gbit/s links, this 2-core machine, OpenMPI 4.1.4):
  // - btl_tcp_flags without "put": OpenMPI's TCP transport sends a large message as one put
  //   fragment, and while it streams one direction of a socket the other waits — two ranks
  //   exchanging 32 MiB got 0.059 GB/s each way (half the link) with put, 0.10–0.11 without it
  //   (plain TCP sockets reach 0.12 both ways at once). A 2-rank ring uses one socket both ways.
  // - mpi_yield_when_idle: every node here shares the same cores, and ranks that spin while
  //   they wait starve the kernel's network processing until the next scheduler tick — a 1-byte
  //   ping-pong took 4.0 ms spinning, 21 µs yielding. Real nodes have cores of their own.
  // - --bind-to none: each node's daemon binds its first rank to "its" core 0 — the same core on
  //   every node here, so all ranks shared one core (a lab-09 step ran 2.2× slower than on one
  //   node). Unbound, the kernel spreads them over the cores the nodes share.
  std::vector<std::string> args;
  if (p.with == "ssh") {
    // As on a cluster: a hostfile, OpenMPI's rsh launcher running the real ssh client (its
    // configuration names the nodes, the key and the host-key policy).
    const fs::path ssh_dir = agent.parent_path() / "ssh";
    args = {"--hostfile", (ssh_dir / "hostfile").string(), "--mca", "plm_rsh_agent", "ssh", "--mca", "plm_rsh_args", "-F " + (ssh_dir / "ssh_config").string()};
  } else {
    args = {"-H", hosts, "--mca", "plm_rsh_agent", agent.string()};
  }
  const std::vector<std::string> rest = {"--map-by", "node", "--mca", "plm_rsh_no_tree_spawn", "1",
          "--mca", "oob_tcp_if_include", p.cidr(), "--mca", "btl", "tcp,vader,self", "--mca", "btl_tcp_if_include", p.cidr(),
          "--mca", "btl_tcp_flags", "send,inplace,need-ack,need-csum", "--mca", "mpi_yield_when_idle", "1", "--bind-to", "none"};
  args.insert(args.end(), rest.begin(), rest.end());
  return args;
}

std::string cluster_sshd_config(const ClusterPlan& plan, int node, const fs::path& ssh_dir) {
  const std::string n = plan.node(node);
  return "# gpulab cluster: the sshd of node " + n + " (started inside its network namespace)\n"
         "ListenAddress " + plan.address(node) + "\n"
         "Port 22\n"
         "HostKey " + (ssh_dir / "host_key").string() + "\n"
         "AuthorizedKeysFile " + (ssh_dir / "authorized_keys").string() + "\n"
         "PermitRootLogin prohibit-password\n"
         "PasswordAuthentication no\n"
         "KbdInteractiveAuthentication no\n"
         "UsePAM no\n"
         "StrictModes no\n"
         "PrintMotd no\n"
         "PidFile " + (ssh_dir / (n + ".pid")).string() + "\n"
         "LogLevel ERROR\n";
}

std::string cluster_ssh_config(const ClusterPlan& plan, const fs::path& ssh_dir) {
  std::string c = "# gpulab cluster: ssh -F this file NODE reaches the node's sshd with the cluster's key\n";
  for (int i = 0; i < plan.nodes; ++i) c += "Host " + plan.node(i) + "\n  HostName " + plan.address(i) + "\n";
  c += "Host *\n"
       "  User root\n"
       "  IdentityFile " + (ssh_dir / "id_ed25519").string() + "\n"
       "  IdentitiesOnly yes\n"
       "  StrictHostKeyChecking no\n"
       "  UserKnownHostsFile /dev/null\n"
       "  BatchMode yes\n"
       "  ConnectTimeout 5\n"
       "  LogLevel ERROR\n";
  return c;
}

std::string cluster_slurm_conf(const ClusterPlan& plan, const fs::path& d, int cpus) {
  const std::string dir = d.string();
  std::string c = "# gpulab cluster: Slurm over the namespaces (slurmctld at the bridge's address, a slurmd in each node)\n"
                  "ClusterName=" + plan.prefix + "\n"
                  "SlurmctldHost=" + plan.controller() + "(" + plan.subnet + ".1)\n"
                  "SlurmUser=root\nSlurmdUser=root\n"
                  "AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=" + dir + "/munge.socket\n"
                  "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n"
                  "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nMpiDefault=none\nReturnToService=2\n"
                  "StateSaveLocation=" + dir + "/state\nSlurmdSpoolDir=" + dir + "/spool-%n\n"
                  "SlurmctldPidFile=" + dir + "/slurmctld.pid\nSlurmdPidFile=" + dir + "/slurmd-%n.pid\n"
                  "SlurmctldLogFile=" + dir + "/slurmctld.log\nSlurmdLogFile=" + dir + "/slurmd-%n.log\n"
                  "SlurmctldPort=" + std::to_string(plan.slurmctld_port()) + "\nSlurmdPort=6818\n";
  for (int i = 0; i < plan.nodes; ++i) {
    c += "NodeName=" + plan.node(i) + " NodeAddr=" + plan.address(i) + " CPUs=" + std::to_string(cpus) + " State=UNKNOWN\n";
  }
  c += "PartitionName=" + plan.prefix + " Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n";
  return c;
}

std::string cluster_hostfile(const ClusterPlan& plan) {
  std::string h;
  for (int i = 0; i < plan.nodes; ++i) h += plan.node(i) + " slots=" + std::to_string(plan.ranks_per_node) + "\n";
  return h;
}

std::string cluster_agent_script() {
  return "#!/bin/sh\n"
         "# gpulab's launcher for OpenMPI's rsh agent (plm_rsh_agent): `agent NODE COMMAND...` runs\n"
         "# COMMAND inside the network namespace NODE, as ssh would on another host. Each node gets a\n"
         "# hostname of its own too (a UTS namespace): OpenMPI names its session folders and shared-\n"
         "# memory files by hostname, and two nodes both called after this machine share them — ranks\n"
         "# on different nodes then crash in the shared-memory transport.\n"
         "node=\"$1\"\n"
         "shift\n"
         "exec ip netns exec \"$node\" unshare --uts sh -c 'hostname \"$0\" || exit 1; eval \"$1\"' \"$node\" \"$*\"\n";
}

fs::path cluster_agent_path(const Paths& paths) { return cluster_dir(paths) / "agent.sh"; }

std::string shell_quote(const std::string& text) {
  std::string q = "'";
  for (char c : text) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::vector<HostfileHost> parse_hostfile(const std::string& text, std::string& error) {
  std::vector<HostfileHost> hosts;
  std::istringstream in(text);
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    HostfileHost h;
    if (!(words >> h.name)) continue;
    for (std::string word; words >> word;) {
      if (word.rfind("slots=", 0) != 0) continue;
      const std::string n = word.substr(6);
      if (n.empty() || n.size() > 6 || n.find_first_not_of("0123456789") != std::string::npos || std::stoi(n) < 1) {
        error = "line " + std::to_string(number) + ": \"" + word + "\" is not slots=N with N >= 1";
        return {};
      }
      h.slots = std::stoi(n);
    }
    if (h.name.find_first_of("'\"`$;|&<>\\") != std::string::npos || h.name[0] == '-') {  // '-': ssh would read it as an option
      error = "line " + std::to_string(number) + ": \"" + h.name + "\" is not a host name";
      return {};
    }
    hosts.push_back(h);
  }
  if (hosts.empty()) error = "no host in it (a line per host: NAME slots=N)";
  return hosts;
}

std::vector<std::string> probe_ssh_argv(const std::string& host, const std::string& remote_command) {
  std::vector<std::string> argv = {"ssh"};
  if (const char* extra = std::getenv("OMPI_MCA_plm_rsh_args")) {
    std::istringstream words(extra);
    for (std::string w; words >> w;) argv.push_back(w);
  }
  argv.insert(argv.end(), {"-o", "BatchMode=yes", "-o", "ConnectTimeout=5", host, remote_command});
  return argv;
}

std::string hostfile_problem(const std::vector<HostfileHost>& hosts, const fs::path& shared) {
  for (const HostfileHost& h : hosts) {
    ProcessOptions o;
    o.timeout_s = 20;
    const ProcessResult r = run_process(probe_ssh_argv(h.name, "cat " + shell_quote(shared.string())), o);
    if (r.timed_out) return "host " + h.name + " did not answer over ssh within 20 s";
    if (r.exited(255)) {
      std::string said = utf8_prefix(r.output, 200);
      while (!said.empty() && std::isspace(static_cast<unsigned char>(said.back()))) said.pop_back();
      return "host " + h.name + ": ssh failed (" + said +
             "): mpirun starts the ranks over ssh, so `ssh " + h.name + " true` must work without a password (a key in ~/.ssh/authorized_keys)";
    }
    if (!r.exited(0) || r.output.find(shared.filename().string()) == std::string::npos) {
      return "host " + h.name + " does not see " + shared.string() +
             ": the ranks write their records into the grade's folder, so the course's tree must lie on a filesystem every host mounts "
             "(a cluster's home or project folder usually is)";
    }
  }
  return "";
}

int slurm_task_count(const char* ntasks, const char* per_node) {
  if (ntasks != nullptr && std::atoi(ntasks) > 0) return std::atoi(ntasks);
  if (per_node == nullptr) return 0;
  static const std::regex item(R"(^(\d+)(\(x(\d+)\))?$)");
  long total = 0;
  std::istringstream items(per_node);
  for (std::string one; std::getline(items, one, ',');) {
    std::smatch m;
    if (!std::regex_match(one, m, item)) return 0;
    total += std::stol(m[1]) * (m[3].matched ? std::stol(m[3]) : 1);
    if (total > 1000000) return 0;
  }
  return static_cast<int>(total);
}

std::vector<std::string> hostfile_mpirun_args(const fs::path& hostfile) { return {"--hostfile", hostfile.string(), "--map-by", "node"}; }

ClusterPlan saved_cluster(const Paths& paths) {
  ClusterPlan p;
  p.nodes = 0;
  const fs::path file = cluster_dir(paths) / "plan.json";
  if (!fs::exists(file)) return p;
  const nlohmann::json j = nlohmann::json::parse(read_text(file), nullptr, false);
  if (j.is_discarded()) return p;
  ClusterPlan saved;
  saved.nodes = j.value("nodes", 0);
  saved.link_rate = j.value("link_rate", std::string());
  saved.ranks_per_node = j.value("ranks_per_node", 1);
  saved.prefix = j.value("prefix", saved.prefix);
  saved.subnet = j.value("subnet", saved.subnet);
  saved.with = j.value("with", std::string());
  const ClusterState now = discover_cluster(saved.prefix);
  for (int i = 0; i < saved.nodes; ++i) {
    if (std::find(now.namespaces.begin(), now.namespaces.end(), saved.node(i)) == now.namespaces.end()) return p;
  }
  return saved;
}

namespace {

/// Kills every process inside the namespaces (deleting a namespace does not end them: a rank cut
/// off by a link fault would live on), then waits until `ip netns pids` lists none.
std::vector<std::string> kill_inside(const ClusterState& state) {
  std::vector<std::string> survivors;
  for (int attempt = 0; attempt < 20; ++attempt) {
    survivors.clear();
    for (const std::string& ns : state.namespaces) {
      std::istringstream pids(quiet({"ip", "netns", "pids", ns}).output);
      for (std::string pid; pids >> pid;) {
        survivors.push_back(ns + ": " + pid);
        kill(std::stoi(pid), SIGKILL);
      }
    }
    if (survivors.empty()) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return survivors;
}

/// Removes everything with @p prefix; "" when nothing is left, else what is.
std::string take_down(const std::string& prefix) {
  const ClusterState before = discover_cluster(prefix);
  const std::vector<std::string> survivors = kill_inside(before);
  for (const Argv& c : cluster_down_commands(before)) (void)quiet(c);  // a veth already gone with its namespace is fine
  // The kernel removes a namespace's links once its last user is gone: wait for it.
  for (int attempt = 0; attempt < 50; ++attempt) {
    const ClusterState now = discover_cluster(prefix);
    if (now.empty()) return survivors.empty() ? "" : "processes would not die: " + survivors.front();
    for (const Argv& c : cluster_down_commands(now)) (void)quiet(c);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const ClusterState left = discover_cluster(prefix);
  return "still there: " + std::to_string(left.namespaces.size()) + " namespace(s), " + std::to_string(left.links.size()) + " link(s)";
}

void print_state(const ClusterPlan& plan, const ClusterState& state) {
  if (state.empty()) {
    std::cout << "cluster: nothing with the prefix \"" << plan.prefix << "-\" exists\n";
    return;
  }
  std::cout << "cluster: " << state.namespaces.size() << " node(s) on bridge " << plan.bridge() << " (" << plan.cidr() << ")\n";
  // Read from the root namespace (no root needed): the bridge's end of each node's link.
  for (const std::string& ns : state.namespaces) {
    const std::string index = ns.substr(ns.rfind("-n") + 2);
    const std::string qdisc = quiet({"tc", "qdisc", "show", "dev", plan.prefix + "-v" + index}).output;
    const std::size_t at = qdisc.find(" rate ");
    const std::string rate = at == std::string::npos ? "unshaped" : qdisc.substr(at + 6, qdisc.find(' ', at + 6) - at - 6);
    std::cout << "  " << ns << "  " << plan.subnet << "." << 10 + std::atoi(index.c_str()) << "  link " << rate << "\n";
  }
}

/// --with ssh: keys, configurations and the hostfile under @p ssh_dir, then one sshd per node,
/// started inside the node's network namespace under a hostname of its own (as the agent gives
/// its commands), and each reached once with the client; "" when all answer, else what failed.
std::string start_sshds(const ClusterPlan& plan, const fs::path& ssh_dir) {
  if (access("/usr/sbin/sshd", X_OK) != 0) return "needs OpenSSH's server (/usr/sbin/sshd): apt-get install openssh-server";
  fs::remove_all(ssh_dir);
  fs::create_directories(ssh_dir);
  fs::create_directories("/run/sshd");  // sshd's privilege-separation folder (its package makes it at boot)
  for (const char* key : {"host_key", "id_ed25519"}) {
    const ProcessResult r = quiet({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", std::string("gpulab-cluster-") + key, "-f", (ssh_dir / key).string()});
    if (!r.exited(0)) return "ssh-keygen failed (" + r.describe() + "): " + r.output;
  }
  fs::copy_file(ssh_dir / "id_ed25519.pub", ssh_dir / "authorized_keys");
  write_text(ssh_dir / "ssh_config", cluster_ssh_config(plan, ssh_dir));
  write_text(ssh_dir / "hostfile", cluster_hostfile(plan));
  for (int i = 0; i < plan.nodes; ++i) {
    const fs::path config = ssh_dir / ("sshd-" + plan.node(i) + ".conf");
    write_text(config, cluster_sshd_config(plan, i, ssh_dir));
    // sshd forks into the background once it listens; its parent's exit status says whether it could.
    const fs::path log = ssh_dir / ("sshd-" + plan.node(i) + ".log");
    const int code = start_daemon({"ip", "netns", "exec", plan.node(i), "unshare", "--uts", "sh", "-c", "hostname \"$0\" && exec /usr/sbin/sshd -f \"$1\" -E \"$2\"",
                                   plan.node(i), config.string(), log.string()});
    if (code != 0) {
      return "the sshd of " + plan.node(i) + " did not start (exit " + std::to_string(code) + ")" +
             (fs::exists(log) ? ": " + utf8_prefix(read_text(log), 300) : std::string());
    }
  }
  for (int i = 0; i < plan.nodes; ++i) {
    ProcessResult r;
    for (int attempt = 0; attempt < 50; ++attempt) {
      r = quiet({"ssh", "-F", (ssh_dir / "ssh_config").string(), plan.node(i), "hostname"});
      if (r.exited(0)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!r.exited(0) || r.output.find(plan.node(i)) == std::string::npos) {
      return "ssh to " + plan.node(i) + " failed (" + r.describe() + "): " + r.output;
    }
  }
  return "";
}

/// A daemon's pid from its pid file, signalled (TERM, then KILL after 2 s); the file removed.
void stop_by_pid_file(const fs::path& file) {
  if (!fs::exists(file)) return;
  const int pid = std::atoi(read_text(file).c_str());
  // Only the daemon `up` started: its command line names this folder (a stale pid file, after a
  // reboot, may name anyone's process now).
  std::string cmdline;
  try {
    cmdline = read_text("/proc/" + std::to_string(pid) + "/cmdline");
  } catch (const std::exception&) {
  }
  if (pid > 1 && cmdline.find(file.parent_path().string()) != std::string::npos) {
    kill(pid, SIGTERM);
    for (int i = 0; i < 20 && kill(pid, 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (kill(pid, 0) == 0) kill(pid, SIGKILL);
  }
  fs::remove(file);
}

/// --with slurm: the controller and munge (in the root namespace: they are processes of this
/// machine, not of a node), stopped. The slurmds are in the nodes and go with them.
void stop_slurm(const fs::path& slurm_dir) {
  stop_by_pid_file(slurm_dir / "slurmctld.pid");
  stop_by_pid_file(slurm_dir / "munged.pid");
}

/// --with slurm: a munge key and munged, slurmctld under the controller's hostname, a slurmd in
/// each node (entered by its network namespace only, nsenter --net, so that it sees this
/// machine's cgroup mounts, which `ip netns exec`'s fresh /sys hides), then every node idle in
/// sinfo; "" when so, else what failed.
std::string start_slurm(const ClusterPlan& plan, const fs::path& slurm_dir) {
  for (const char* daemon : {"/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd"}) {
    if (access(daemon, X_OK) != 0) return std::string("needs ") + daemon + ": apt-get install slurm-wlm munge";
  }
  fs::remove_all(slurm_dir);
  fs::create_directories(slurm_dir / "state");
  // A key of the cluster's own (munged refuses a key others can read).
  {
    std::ifstream random("/dev/urandom", std::ios::binary);
    std::string key(1024, '\0');
    random.read(key.data(), static_cast<std::streamsize>(key.size()));
    write_text(slurm_dir / "munge.key", key);
    chmod((slurm_dir / "munge.key").c_str(), 0400);
  }
  const int cpus = std::max(1u, std::thread::hardware_concurrency());
  write_text(slurm_dir / "slurm.conf", cluster_slurm_conf(plan, slurm_dir, cpus));
  // slurmd reads cgroup.conf beside slurm.conf: this machine's hierarchy (v2 has cgroup.controllers at the top).
  write_text(slurm_dir / "cgroup.conf", std::string("CgroupPlugin=") + (fs::exists("/sys/fs/cgroup/cgroup.controllers") ? "cgroup/v2" : "cgroup/v1") +
                                            "\nCgroupAutomount=no\n");
  const std::string conf = (slurm_dir / "slurm.conf").string();
  const auto log_of = [&](const std::string& name) {
    const fs::path log = slurm_dir / name;
    return fs::exists(log) ? ": " + utf8_prefix(read_text(log).substr(read_text(log).size() > 600 ? read_text(log).size() - 600 : 0), 600) : std::string();
  };
  int code = start_daemon({"/usr/sbin/munged", "--force", "--socket", (slurm_dir / "munge.socket").string(), "--key-file", (slurm_dir / "munge.key").string(),
                           "--pid-file", (slurm_dir / "munged.pid").string(), "--log-file", (slurm_dir / "munged.log").string(), "--seed-file",
                           (slurm_dir / "munged.seed").string()});
  if (code != 0) return "munged did not start (exit " + std::to_string(code) + ")" + log_of("munged.log");
  code = start_daemon({"unshare", "--uts", "sh", "-c", "hostname \"$0\" && exec /usr/sbin/slurmctld -f \"$1\"", plan.controller(), conf});
  if (code != 0) return "slurmctld did not start (exit " + std::to_string(code) + ")" + log_of("slurmctld.log");
  for (int i = 0; i < plan.nodes; ++i) {
    code = start_daemon({"nsenter", "--net=/var/run/netns/" + plan.node(i), "unshare", "--uts", "sh", "-c", "hostname \"$0\" && exec /usr/sbin/slurmd -f \"$1\"",
                         plan.node(i), conf});
    if (code != 0) return "the slurmd of " + plan.node(i) + " did not start (exit " + std::to_string(code) + ")" + log_of("slurmd-" + plan.node(i) + ".log");
  }
  // Every node registered and idle (up to 15 s).
  ProcessOptions o;
  o.env["SLURM_CONF"] = conf;
  o.timeout_s = 10;
  std::string states;
  for (int attempt = 0; attempt < 75; ++attempt) {
    const ProcessResult r = run_process({"sinfo", "-h", "-N", "-o", "%N %T"}, o);
    states = r.output;
    int idle = 0;
    std::istringstream lines(states);
    for (std::string node, state; lines >> node >> state;) idle += state == "idle";
    if (idle == plan.nodes) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return "the nodes did not all come up idle within 15 s (sinfo: " + states + ")" + log_of("slurmctld.log");
}

}  // namespace

int cluster_command(const Paths& paths, const std::string& action, const ClusterPlan& plan) {
  if (action == "status") {
    const ClusterPlan saved = saved_cluster(paths);
    print_state(saved.nodes > 0 ? saved : plan, discover_cluster(saved.nodes > 0 ? saved.prefix : plan.prefix));
    if (saved.nodes > 0) {
      std::cout << "  up with --nodes " << saved.nodes << (saved.link_rate.empty() ? "" : " --link-rate " + saved.link_rate)
                << " --ranks-per-node " << saved.ranks_per_node << ": ./gpulab grade NN --nodes " << saved.nodes << " places ranks there\n";
    }
    return 0;
  }
  if (geteuid() != 0) {
    std::string again = action;
    if (action == "up") {
      again += " --nodes " + std::to_string(plan.nodes) + (plan.link_rate.empty() ? "" : " --link-rate " + plan.link_rate) +
               (plan.ranks_per_node == 1 ? "" : " --ranks-per-node " + std::to_string(plan.ranks_per_node)) + (plan.with.empty() ? "" : " --with " + plan.with);
    }
    std::cout << "gpulab cluster " << action << ": needs root (network namespaces, veth links and tc need CAP_NET_ADMIN): "
              << "sudo ./gpulab cluster " << again << "\n";
    return 2;
  }
  if (action == "down") {
    stop_slurm(cluster_dir(paths) / "slurm");         // the controller and munge run outside the nodes
    const std::string left = take_down(plan.prefix);  // the sshds and slurmds too: they are processes in the namespaces
    fs::remove(cluster_dir(paths) / "plan.json");
    fs::remove(cluster_agent_path(paths));
    fs::remove_all(cluster_dir(paths) / "ssh");
    fs::remove_all(cluster_dir(paths) / "slurm");
    std::error_code ec;
    fs::remove(cluster_dir(paths), ec);  // the folder too, when nothing else is in it
    if (!left.empty()) {
      std::cout << "gpulab cluster down: " << left << "\n";
      return 1;
    }
    std::cout << "cluster: down (no namespace, link or bridge named " << plan.prefix << "-* is left)\n";
    return 0;
  }
  if (action != "up") {
    std::cout << "gpulab cluster: unknown action \"" << action << "\" (up, down, status)\n";
    return 2;
  }
  if (const std::string bad = check_plan(plan); !bad.empty()) {
    std::cout << "gpulab cluster up: " << bad << "\n";
    return 2;
  }
  // ip and tc (iproute2) build the namespaces; ./gpulab installs them where apt-get can run.
  if (!quiet({"ip", "-V"}).exited(0)) {
    std::cout << "gpulab cluster up: needs iproute2's ip and tc, which are not here: apt-get install iproute2\n";
    return 2;
  }
  stop_slurm(cluster_dir(paths) / "slurm");  // an earlier cluster's controller and munge, before their pid files go
  if (const std::string left = take_down(plan.prefix); !left.empty()) {
    std::cout << "gpulab cluster up: what an earlier cluster left could not be removed: " << left << "\n";
    return 1;
  }
  for (const Argv& c : cluster_up_commands(plan)) {
    const ProcessResult r = quiet(c);
    if (r.exited(0)) continue;
    std::cout << "gpulab cluster up: `" << join(c) << "` failed (" << r.describe() << "): " << r.output;
    (void)take_down(plan.prefix);
    return 1;
  }
  if (const std::string down = wait_for_links(plan); !down.empty()) {
    std::cout << "gpulab cluster up: these links did not come up within 5 s:" << down << "\n";
    (void)take_down(plan.prefix);
    return 1;
  }
  fs::create_directories(cluster_dir(paths));
  write_text(cluster_agent_path(paths), cluster_agent_script());
  chmod(cluster_agent_path(paths).c_str(), 0755);
  if (plan.with == "ssh") {
    if (const std::string failed = start_sshds(plan, cluster_dir(paths) / "ssh"); !failed.empty()) {
      std::cout << "gpulab cluster up --with ssh: " << failed << "\n";
      (void)take_down(plan.prefix);  // the sshds live in the namespaces: they go with them
      fs::remove_all(cluster_dir(paths) / "ssh");
      return 1;
    }
  }
  if (plan.with == "slurm") {
    if (const std::string failed = start_slurm(plan, cluster_dir(paths) / "slurm"); !failed.empty()) {
      std::cout << "gpulab cluster up --with slurm: " << failed << "\n";
      stop_slurm(cluster_dir(paths) / "slurm");
      (void)take_down(plan.prefix);
      fs::remove_all(cluster_dir(paths) / "slurm");
      return 1;
    }
  }
  nlohmann::json j = {{"nodes", plan.nodes}, {"link_rate", plan.link_rate}, {"ranks_per_node", plan.ranks_per_node}, {"prefix", plan.prefix},
                      {"subnet", plan.subnet}, {"with", plan.with}};
  write_text(cluster_dir(paths) / "plan.json", j.dump(2) + "\n");
  print_state(plan, discover_cluster(plan.prefix));
  if (plan.with == "slurm") {
    const fs::path conf = cluster_dir(paths) / "slurm" / "slurm.conf";
    std::cout << "  Slurm: slurmctld at " << plan.subnet << ".1, a slurmd in each node, partition " << plan.prefix << "; with SLURM_CONF=" << conf.string()
              << ": sinfo; grade: SLURM_CONF=" << conf.string() << " salloc -N " << plan.nodes << " -n " << plan.nodes << " ./gpulab grade 07 --ranks "
              << plan.nodes << " (add --solutions for the reference)\n";
  }
  if (plan.with == "ssh") {
    const fs::path ssh_dir = cluster_dir(paths) / "ssh";
    std::cout << "  an sshd in each node; reach one: ssh -F " << (ssh_dir / "ssh_config").string() << " " << plan.node(0)
              << "; hostfile: " << (ssh_dir / "hostfile").string() << "\n";
    std::cout << "  grade over ssh as on a cluster: OMPI_MCA_plm_rsh_args=\"-F " << (ssh_dir / "ssh_config").string() << "\" ./gpulab grade 07 --hostfile "
              << (ssh_dir / "hostfile").string() << "\n";
  }
  std::cout << "  grade a distributed lab across it: ./gpulab grade 07 --nodes " << plan.nodes << "; remove it: ./gpulab cluster down\n";
  return 0;
}

}  // namespace gpulab::cli
