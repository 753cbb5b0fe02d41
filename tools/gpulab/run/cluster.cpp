/// @file cluster.cpp
/// @brief Network namespaces as the nodes of a cluster (cluster.hpp).
#include "run/cluster.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
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
  return {"-H", hosts, "--map-by", "node", "--mca", "plm_rsh_agent", agent.string(), "--mca", "plm_rsh_no_tree_spawn", "1",
          "--mca", "oob_tcp_if_include", p.cidr(), "--mca", "btl", "tcp,vader,self", "--mca", "btl_tcp_if_include", p.cidr(),
          "--mca", "btl_tcp_flags", "send,inplace,need-ack,need-csum", "--mca", "mpi_yield_when_idle", "1", "--bind-to", "none"};
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
               (plan.ranks_per_node == 1 ? "" : " --ranks-per-node " + std::to_string(plan.ranks_per_node));
    }
    std::cout << "gpulab cluster " << action << ": needs root (network namespaces, veth links and tc need CAP_NET_ADMIN): "
              << "sudo ./gpulab cluster " << again << "\n";
    return 2;
  }
  if (action == "down") {
    const std::string left = take_down(plan.prefix);
    fs::remove(cluster_dir(paths) / "plan.json");
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
  nlohmann::json j = {{"nodes", plan.nodes}, {"link_rate", plan.link_rate}, {"ranks_per_node", plan.ranks_per_node}, {"prefix", plan.prefix},
                      {"subnet", plan.subnet}};
  write_text(cluster_dir(paths) / "plan.json", j.dump(2) + "\n");
  print_state(plan, discover_cluster(plan.prefix));
  std::cout << "  grade a distributed lab across it: ./gpulab grade 07 --nodes " << plan.nodes << "; remove it: ./gpulab cluster down\n";
  return 0;
}

}  // namespace gpulab::cli
