/// @file test_cluster.cpp
/// @brief The cluster on one machine (cluster.hpp): the plan's commands, names and addresses, the
/// state read back from `ip`, mpirun's placement — without root. With root (CI is), an
/// integration case: two nodes over a 1 Gbit/s link, a ping-pong whose bytes arrive unchanged at
/// the link's rate, an all-reduce of integers over TCP exact on both ranks, and `down` leaving no
/// namespace, link or bridge behind.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "base/files.hpp"
#include "base/process.hpp"
#include "run/cluster.hpp"
#include "run/mpi.hpp"

using gpulab::cli::ClusterPlan;
namespace fs = std::filesystem;

namespace {
bool has(const std::vector<std::vector<std::string>>& commands, const std::vector<std::string>& c) {
  return std::find(commands.begin(), commands.end(), c) != commands.end();
}

/// The [cluster] cases run only where the test main finds root, iproute2 and mpirun (elsewhere
/// they are reported skipped, exit 77); gpulab-pingpong is then built (it needs MPI) or missing
/// by mistake, which fails.
std::string pingpong_program() {
  const std::string pingpong = std::string(GPULAB_BIN_DIR) + "/gpulab-pingpong";
  INFO("gpulab-pingpong is built with MPI: " << pingpong);
  REQUIRE(std::filesystem::exists(pingpong));
  return pingpong;
}

/// The pids of `sleep SECONDS` processes on this machine (a command line is NUL-separated, so
/// processes_running cannot be asked for "sleep 317").
std::vector<int> sleepers(int seconds) {
  const std::string want = std::string("sleep") + '\0' + std::to_string(seconds) + '\0';
  std::vector<int> pids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline;
    try {
      cmdline = gpulab::cli::read_text(entry.path() / "cmdline");
    } catch (...) {
      continue;
    }
    if (cmdline == want) pids.push_back(std::stoi(name));
  }
  return pids;
}

/// Lab 07's planted submission whose rank 1 never sends (it hangs every rank), made under @p root
/// from the reference and the plant's patch, as the selftest makes it.
fs::path never_sends_submission(const fs::path& root) {
  const fs::path project = fs::path(GPULAB_CLI_SOURCES).parent_path().parent_path();
  const fs::path dir = root / "never-sends";
  fs::create_directories(dir);
  fs::copy_file(project / "solutions" / "07-collectives" / "ring.cpp", dir / "ring.cpp", fs::copy_options::overwrite_existing);
  gpulab::cli::ProcessOptions o;
  o.cwd = dir.string();
  o.env = {{"GIT_CEILING_DIRECTORIES", root.string()}};  // outside any repository: the patch's own paths
  const auto applied = gpulab::cli::run_process({"git", "apply", (project / "tests" / "07-collectives" / "planted" / "a-rank-that-never-sends-hangs.patch").string()}, o);
  INFO(applied.output);
  REQUIRE(applied.exited(0));
  return dir;
}

/// A two-node cluster at 1 Gbit/s of its own (prefix and subnet apart from the learner's and from
/// the other case's), up, with a scratch state folder and mpirun placed across it.
struct ScratchCluster {
  gpulab::cli::Paths paths;
  ClusterPlan plan;
  std::string pingpong = pingpong_program();
  gpulab::cli::ProcessOptions options;  ///< for run_mpi: 120 s
  ScratchCluster(const std::string& prefix, const std::string& subnet, const std::string& with = "", int nodes = 2) {
    options.timeout_s = 120;
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    paths.root = std::filesystem::temp_directory_path() / ("gpulab-test-" + prefix);
    paths.build = paths.root / "build";
    std::filesystem::remove_all(paths.root);
    std::filesystem::create_directories(paths.root);
    plan.nodes = nodes;
    plan.link_rate = "1gbit";
    plan.prefix = prefix;
    plan.subnet = subnet;
    plan.with = with;
    up = gpulab::cli::cluster_command(paths, "up", plan) == 0;
    gpulab::cli::set_mpi_placement(gpulab::cli::cluster_mpirun_args(plan, gpulab::cli::cluster_agent_path(paths)));
  }
  ~ScratchCluster() {
    gpulab::cli::set_mpi_placement({});
    gpulab::cli::set_mpi_faults({});
    gpulab::cli::set_mpi_remote_hosts({});
    unsetenv("OMPI_MCA_plm_rsh_args");  // a case that stopped early leaves the next its own ssh
    // A case that stopped early (a failed REQUIRE) still leaves nothing behind.
    if (!gpulab::cli::discover_cluster(plan.prefix).empty()) (void)gpulab::cli::cluster_command(paths, "down", plan);
    std::filesystem::remove_all(paths.root);
  }
  bool up = false;
};
}  // namespace

TEST_CASE("cluster plans are checked before anything is made", "[cpu]") {
  ClusterPlan p;
  CHECK(gpulab::cli::check_plan(p).empty());
  p.link_rate = "1gbit";
  CHECK(gpulab::cli::check_plan(p).empty());
  p.link_rate = "2.5gbit";
  CHECK(gpulab::cli::check_plan(p).empty());
  p.link_rate = "fast";
  CHECK(gpulab::cli::check_plan(p).find("not a rate") != std::string::npos);
  p.link_rate = "1gbit; reboot";
  CHECK_FALSE(gpulab::cli::check_plan(p).empty());
  p.link_rate = "";
  p.nodes = 0;
  CHECK_FALSE(gpulab::cli::check_plan(p).empty());
  p.nodes = 65;
  CHECK_FALSE(gpulab::cli::check_plan(p).empty());
}

TEST_CASE("cluster up makes a bridge and one namespace and veth pair per node with both ends shaped", "[cpu]") {
  ClusterPlan p;
  p.nodes = 3;
  p.link_rate = "1gbit";
  const auto c = gpulab::cli::cluster_up_commands(p);
  CHECK(c.front() == std::vector<std::string>{"ip", "link", "add", "gpulab-br", "type", "bridge"});
  CHECK(has(c, {"ip", "addr", "add", "10.213.0.1/24", "dev", "gpulab-br"}));
  CHECK(has(c, {"ip", "netns", "add", "gpulab-n2"}));
  CHECK(has(c, {"ip", "link", "add", "gpulab-v2", "type", "veth", "peer", "name", "gpulab-e2"}));
  CHECK(has(c, {"ip", "-n", "gpulab-n2", "addr", "add", "10.213.0.12/24", "dev", "gpulab-e2"}));
  CHECK(has(c, {"tc", "qdisc", "add", "dev", "gpulab-v1", "root", "tbf", "rate", "1gbit", "burst", "256kb", "latency", "100ms"}));
  CHECK(has(c, {"ip", "netns", "exec", "gpulab-n1", "tc", "qdisc", "add", "dev", "gpulab-e1", "root", "tbf", "rate", "1gbit", "burst", "256kb",
                "latency", "100ms"}));
  CHECK(c.size() == 3 + 3 * (8 + 2));
  // Every name carries the prefix, every address the subnet: nothing else is touched.
  for (const auto& argv : c) {
    for (const std::string& a : argv) {
      if (a.rfind("gpulab", 0) == 0) CHECK(a.rfind("gpulab-", 0) == 0);
      if (a.find('.') != std::string::npos && a.find('/') != std::string::npos) CHECK(a.rfind("10.213.0.", 0) == 0);
    }
  }
  p.link_rate.clear();
  CHECK(gpulab::cli::cluster_up_commands(p).size() == 3 + 3 * 8);  // unshaped: no tc
}

TEST_CASE("cluster state is read back from ip and down removes exactly the prefix", "[cpu]") {
  const std::string netns = "gpulab-n1 (id: 4)\ngpulab-n0 (id: 3)\nsomeone-else\ngpulabx-n0\n";
  const std::string links =
      "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000\\    link/loopback\n"
      "2: eth0@if20: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP\n"
      "7: gpulab-br: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP\n"
      "9: gpulab-v1@if8: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc tbf master gpulab-br state UP\n"
      "10: docker0: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500\n";
  const auto s = gpulab::cli::parse_cluster_state("gpulab", netns, links);
  CHECK(s.namespaces == std::vector<std::string>{"gpulab-n1", "gpulab-n0"});
  CHECK(s.links == std::vector<std::string>{"gpulab-br", "gpulab-v1"});
  const auto down = gpulab::cli::cluster_down_commands(s);
  CHECK(down == std::vector<std::vector<std::string>>{{"ip", "netns", "del", "gpulab-n1"},
                                                      {"ip", "netns", "del", "gpulab-n0"},
                                                      {"ip", "link", "del", "gpulab-br"},
                                                      {"ip", "link", "del", "gpulab-v1"}});
  CHECK(gpulab::cli::parse_cluster_state("gpulab", "", "").empty());
}

TEST_CASE("link rates are read as tc reads them: decimal prefixes and bits", "[cpu]") {
  CHECK(gpulab::cli::link_rate_bytes_per_s("1gbit") == 125e6);
  CHECK(gpulab::cli::link_rate_bytes_per_s("100mbit") == 12.5e6);
  CHECK(gpulab::cli::link_rate_bytes_per_s("2.5gbit") == 312.5e6);
  CHECK(gpulab::cli::link_rate_bytes_per_s("8bit") == 1.0);
  CHECK(gpulab::cli::link_rate_bytes_per_s("") == 0.0);       // unshaped
  CHECK(gpulab::cli::link_rate_bytes_per_s("1gbps") == 0.0);  // not a form check_plan accepts
}

TEST_CASE("mpirun places ranks round-robin across the nodes over TCP on the subnet", "[cpu]") {
  ClusterPlan p;
  p.nodes = 4;
  p.ranks_per_node = 2;
  const auto a = gpulab::cli::cluster_mpirun_args(p, "/x/agent.sh");
  const auto at = [&](const std::string& key) { return std::find(a.begin(), a.end(), key); };
  REQUIRE(at("-H") != a.end());
  CHECK(*(at("-H") + 1) == "gpulab-n0:2,gpulab-n1:2,gpulab-n2:2,gpulab-n3:2");
  CHECK(*(at("--map-by") + 1) == "node");
  CHECK(*(at("plm_rsh_agent") + 1) == "/x/agent.sh");
  CHECK(*(at("btl_tcp_if_include") + 1) == "10.213.0.0/24");
  CHECK(*(at("oob_tcp_if_include") + 1) == "10.213.0.0/24");
  // No put protocol over TCP (it halves a socket used both ways), and ranks that yield (the nodes share cores).
  CHECK((*(at("btl_tcp_flags") + 1)).find("put") == std::string::npos);
  CHECK(*(at("mpi_yield_when_idle") + 1) == "1");
  CHECK(*(at("--bind-to") + 1) == "none");  // every node would bind its first rank to the same core 0
  // Each node has a network namespace and a hostname of its own.
  CHECK(gpulab::cli::cluster_agent_script().find("exec ip netns exec \"$node\" unshare --uts sh -c 'hostname \"$0\" || exit 1; eval \"$1\"' \"$node\" \"$*\"") !=
        std::string::npos);
}

TEST_CASE("a two-node cluster over a 1 Gbit/s link moves bytes at the link rate and all-reduces exactly and leaves nothing behind", "[cpu][cluster]") {
  ScratchCluster cluster("gpltest", "10.213.9");
  REQUIRE(cluster.up);
  const gpulab::cli::Paths& paths = cluster.paths;
  const ClusterPlan& p = cluster.plan;
  const std::string& pingpong = cluster.pingpong;
  const gpulab::cli::ProcessOptions& o = cluster.options;
  const auto state = gpulab::cli::discover_cluster("gpltest");
  CHECK(state.namespaces.size() == 2);
  const auto run = gpulab::cli::run_mpi(2, paths.root / "logs", {pingpong}, o);
  const std::string out = run.rank_output.empty() ? "" : run.rank_output[0];
  INFO(run.process.output + out);
  CHECK(run.process.exited(0));
  const std::size_t b = out.find("beta_gbs ");
  REQUIRE(b != std::string::npos);
  const double beta = std::atof(out.c_str() + b + 9);
  // An all-reduce over TCP across both nodes, exact on integers (checked on every rank).
  CHECK(out.find("allreduce_exact 2") != std::string::npos);
  // 1 Gbit/s is 0.125 GB/s: TCP over tbf gets about 94 % of it (measured when this was written).
  CHECK(beta > 0.125 * 0.6);
  CHECK(beta < 0.125 * 1.1);
  // down: kills what runs inside, removes namespaces, veths and the bridge.
  CHECK(gpulab::cli::cluster_command(paths, "down", p) == 0);
  CHECK(gpulab::cli::discover_cluster("gpltest").empty());
}

TEST_CASE("with ssh the nodes are reached over ssh with a hostfile and the grader's environment is exported", "[cpu]") {
  ClusterPlan p;
  p.nodes = 2;
  p.ranks_per_node = 3;
  p.with = "ssh";
  CHECK(gpulab::cli::check_plan(p).empty());
  const auto a = gpulab::cli::cluster_mpirun_args(p, "/x/cluster/agent.sh");
  const auto at = [&](const std::string& key) { return std::find(a.begin(), a.end(), key); };
  CHECK(at("-H") == a.end());
  REQUIRE(at("--hostfile") != a.end());
  CHECK(*(at("--hostfile") + 1) == "/x/cluster/ssh/hostfile");
  CHECK(*(at("plm_rsh_agent") + 1) == "ssh");
  CHECK(*(at("plm_rsh_args") + 1) == "-F /x/cluster/ssh/ssh_config");
  CHECK(*(at("btl_tcp_if_include") + 1) == "10.213.0.0/24");
  CHECK(gpulab::cli::cluster_hostfile(p) == "gpulab-n0 slots=3\ngpulab-n1 slots=3\n");
  const std::string client = gpulab::cli::cluster_ssh_config(p, "/x/cluster/ssh");
  CHECK(client.find("Host gpulab-n1\n  HostName 10.213.0.11\n") != std::string::npos);
  CHECK(client.find("BatchMode yes") != std::string::npos);  // never a password prompt
  const std::string server = gpulab::cli::cluster_sshd_config(p, 1, "/x/cluster/ssh");
  CHECK(server.find("ListenAddress 10.213.0.11\n") != std::string::npos);
  CHECK(server.find("PasswordAuthentication no") != std::string::npos);
  p.with = "telnet";
  CHECK(gpulab::cli::check_plan(p).find("--with") != std::string::npos);
  // The environment the grader adds, and this process's GPULAB_* variables, go to every rank by name.
  setenv("GPULAB_TEST_EXPORTED", "1", 1);
  const auto names = gpulab::cli::mpi_exports({{"GPULAB_RUN_TOKEN", "t"}, {"NVIDIA_TF32_OVERRIDE", "0"}});
  unsetenv("GPULAB_TEST_EXPORTED");
  for (const char* name : {"GPULAB_RUN_TOKEN", "NVIDIA_TF32_OVERRIDE", "GPULAB_TEST_EXPORTED"}) {
    CHECK(std::find(names.begin(), names.end(), name) != names.end());
  }
  const auto argv = gpulab::cli::mpirun_argv(2, "/x/logs", {"prog"}, {"GPULAB_RUN_TOKEN"});
  const auto x = std::find(argv.begin(), argv.end(), "-x");
  REQUIRE(x != argv.end());
  CHECK(*(x + 1) == "GPULAB_RUN_TOKEN");
}

TEST_CASE("hostfiles are read as OpenMPI reads them and a real cluster keeps its own transport", "[cpu]") {
  std::string error;
  const auto hosts = gpulab::cli::parse_hostfile("# the lab's nodes\nnode07 slots=4\n\nnode08   # two cores\nnode09 slots=2 max_slots=8\n", error);
  REQUIRE(hosts.size() == 3);
  CHECK(hosts[0].name == "node07");
  CHECK(hosts[0].slots == 4);
  CHECK(hosts[1].slots == 1);
  CHECK(hosts[2].slots == 2);
  CHECK(gpulab::cli::parse_hostfile("node07 slots=0\n", error).empty());
  CHECK(error.find("line 1") != std::string::npos);
  CHECK(gpulab::cli::parse_hostfile("node07;reboot slots=2\n", error).empty());
  CHECK(error.find("not a host name") != std::string::npos);
  CHECK(gpulab::cli::parse_hostfile("-oProxyCommand=reboot\n", error).empty());  // ssh would take it for an option
  CHECK(gpulab::cli::parse_hostfile("node07 slots=99999999999\n", error).empty());
  CHECK(error.find("is not slots=N") != std::string::npos);
  CHECK(gpulab::cli::shell_quote("/home/o'brien/gpulab") == "'/home/o'\\''brien/gpulab'");
  CHECK(gpulab::cli::parse_hostfile("# nothing\n", error).empty());
  CHECK(error.find("no host") != std::string::npos);
  const auto forced = [](const std::vector<std::string>& argv) { return std::find(argv.begin(), argv.end(), "pml") != argv.end(); };
  gpulab::cli::set_mpi_placement(gpulab::cli::hostfile_mpirun_args("/x/hosts"), false);
  const auto real = gpulab::cli::mpirun_argv(4, "/x/logs", {"prog"});
  gpulab::cli::set_mpi_placement({});
  CHECK_FALSE(forced(real));
  CHECK(std::find(real.begin(), real.end(), "/x/hosts") != real.end());
  CHECK(forced(gpulab::cli::mpirun_argv(4, "/x/logs", {"prog"})));  // one node: ob1, as the tests assume
  setenv("OMPI_MCA_plm_rsh_args", "-F /x/ssh_config", 1);
  const auto probe = gpulab::cli::probe_ssh_argv("node07", "true");
  unsetenv("OMPI_MCA_plm_rsh_args");
  CHECK(probe == std::vector<std::string>{"ssh", "-F", "/x/ssh_config", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "node07", "true"});
}

TEST_CASE("a Slurm allocation's tasks are read as OpenMPI counts its slots", "[cpu]") {
  CHECK(gpulab::cli::slurm_task_count("6", "1(x2)") == 6);       // -n given
  CHECK(gpulab::cli::slurm_task_count(nullptr, "1(x2)") == 2);   // salloc -N 2: one each
  CHECK(gpulab::cli::slurm_task_count(nullptr, "4(x2),2") == 10);
  CHECK(gpulab::cli::slurm_task_count(nullptr, "3") == 3);
  CHECK(gpulab::cli::slurm_task_count(nullptr, "x") == 0);
  CHECK(gpulab::cli::slurm_task_count(nullptr, nullptr) == 0);
}

TEST_CASE("inside a Slurm allocation a local grade keeps mpirun off Slurm and the slurm launcher leaves it on", "[cpu]") {
  const char* job = std::getenv("SLURM_JOB_ID");
  const std::string saved = job != nullptr ? job : "";
  setenv("SLURM_JOB_ID", "7", 1);
  const auto off_slurm = [](const std::vector<std::string>& argv) { return std::find(argv.begin(), argv.end(), "^slurm") != argv.end(); };
  const auto local = gpulab::cli::mpirun_argv(2, "/x/logs", {"prog"});
  gpulab::cli::set_mpi_placement({}, false);  // --launcher slurm: mpirun takes the allocation's nodes and starts its daemons by srun
  const auto slurm = gpulab::cli::mpirun_argv(2, "/x/logs", {"prog"});
  gpulab::cli::set_mpi_placement({});
  if (saved.empty()) {
    unsetenv("SLURM_JOB_ID");
  } else {
    setenv("SLURM_JOB_ID", saved.c_str(), 1);
  }
  CHECK(off_slurm(local));
  CHECK_FALSE(off_slurm(slurm));
}

TEST_CASE("the scripts that kill a run's processes on another host match the run's marker and the rank's program and nothing the shell could run", "[cpu]") {
  const std::string all = gpulab::cli::marked_kill_script("4242-7");
  CHECK(all.find("grep -lsxz 'GPULAB_MPI_RUN=4242-7' /proc/[0-9]*/environ") != std::string::npos);
  CHECK(all.find("/proc/$p/ns/net") != std::string::npos);  // this host's network only: the namespaces share one /proc
  CHECK(all.find("OMPI_COMM_WORLD_RANK") == std::string::npos);
  CHECK(all.substr(all.size() - 9) == "echo done");
  const std::string rank = gpulab::cli::marked_kill_script("4242-7", 3, "/home/o'brien/build/test_ring");
  CHECK(rank.find("'OMPI_COMM_WORLD_RANK=3'") != std::string::npos);
  CHECK(rank.find("= '/home/o'\\''brien/build/test_ring' ]") != std::string::npos);
  CHECK(gpulab::cli::marked_kill_script("1; reboot").empty());
  CHECK(gpulab::cli::marked_kill_script("4242-7", 1, "").empty());
  // For real on this host: two "ranks" of a run and one of another run, each a sleep carrying its
  // marker; the rank script kills run 4242-9's rank 1 alone, the look finds without killing, and
  // the scan of the whole run takes what is left of it.
  for (const char* env : {"GPULAB_MPI_RUN=4242-9 OMPI_COMM_WORLD_RANK=0", "GPULAB_MPI_RUN=4242-9 OMPI_COMM_WORLD_RANK=1",
                          "GPULAB_MPI_RUN=4242-8 OMPI_COMM_WORLD_RANK=1"}) {
    (void)gpulab::cli::start_daemon({"sh", "-c", std::string("exec env ") + env + " setsid sleep 319 >/dev/null 2>&1 &"});
  }
  for (int i = 0; i < 50 && sleepers(319).size() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(sleepers(319).size() == 3);
  auto words = [](const std::string& out, const std::string& word) {
    int n = 0;
    for (std::size_t at = 0; (at = out.find(word + " ", at)) != std::string::npos; ++at) ++n;
    return n;
  };
  const auto killed = gpulab::cli::run_process({"sh", "-c", gpulab::cli::marked_kill_script("4242-9", 1, "sleep")});
  const auto looked = gpulab::cli::run_process({"sh", "-c", gpulab::cli::marked_kill_script("4242-9", -1, "", false)});
  const auto rest = gpulab::cli::run_process({"sh", "-c", gpulab::cli::marked_kill_script("4242-9")});
  const std::size_t left = sleepers(319).size();
  for (int pid : sleepers(319)) kill(pid, SIGKILL);  // whatever the checks say, nothing stays
  INFO(killed.output + looked.output + rest.output);
  CHECK(words(killed.output, "killed") == 1);
  CHECK(words(looked.output, "found") == 1);  // rank 0 of the run, untouched by the look
  CHECK(words(rest.output, "killed") == 1);
  CHECK(left == 1);  // the other run's
  const auto none = gpulab::cli::run_process({"sh", "-c", gpulab::cli::marked_kill_script("999999-1", 1, "/nowhere/prog")});
  CHECK(none.exited(0));
  CHECK(none.output == "done\n");
}

TEST_CASE("a two-node cluster reached over ssh runs ranks on both nodes with the grader's environment and grades lab 07 over its hostfile", "[cpu][cluster][ssh]") {
  ScratchCluster cluster("gplssh", "10.213.7", "ssh", 3);
  REQUIRE(cluster.up);
  const gpulab::cli::Paths& paths = cluster.paths;
  const ClusterPlan& p = cluster.plan;
  const fs::path ssh_dir = gpulab::cli::cluster_agent_path(paths).parent_path() / "ssh";
  // Each rank says where it runs and what it was given: a variable of the run (ProcessOptions.env)
  // reaches it only through mpirun's -x, since ssh passes no environment.
  gpulab::cli::ProcessOptions o = cluster.options;
  o.env["GPULAB_PROBE_VALUE"] = "42";
  const auto run = gpulab::cli::run_mpi(2, paths.root / "logs-env", {"sh", "-c", "echo host=$(hostname) value=$GPULAB_PROBE_VALUE"}, o);
  INFO(run.process.output);
  CHECK(run.process.exited(0));
  REQUIRE(run.rank_output.size() == 2);
  CHECK(run.rank_output[0].find("host=gplssh-n0 value=42") != std::string::npos);
  CHECK(run.rank_output[1].find("host=gplssh-n1 value=42") != std::string::npos);
  CHECK(run.rank_hosts == std::map<int, std::string>{{0, "gplssh-n0"}, {1, "gplssh-n1"}});  // so a silent rank is named with its host
  // Each node is asked over ssh, by the run's marker, for what a run left (the hanging grade
  // below), and a rank to kill is found there.
  gpulab::cli::RemoteHosts over_ssh;
  over_ssh.via = gpulab::cli::RemoteHosts::Via::kSsh;
  over_ssh.hosts = {p.node(0), p.node(1)};
  gpulab::cli::set_mpi_remote_hosts(over_ssh);
  setenv("OMPI_MCA_plm_rsh_args", ("-F " + (ssh_dir / "ssh_config").string()).c_str(), 1);
  gpulab::cli::ProcessOptions limited = cluster.options;
  limited.timeout_s = 8;
  // A rank killed on its host (--fault kill:1): found over ssh by the run's marker and its rank,
  // on the node that runs it, and named with that node.
  {
    std::string error;
    gpulab::cli::set_mpi_faults({gpulab::cli::parse_fault("kill:1@1", error)});
    const auto killed = gpulab::cli::run_mpi(2, paths.root / "logs-kill", {"sleep", "311"}, limited);
    gpulab::cli::set_mpi_faults({});
    std::string said;
    for (const std::string& l : killed.problems) said += l + "; ";
    INFO(said);
    CHECK_FALSE(killed.process.timed_out);  // the kill ends the run, well within its limit
    CHECK(said.find(" s: rank 1 (pid ") != std::string::npos);
    CHECK(said.find(" on gplssh-n1) was killed") != std::string::npos);
    CHECK(said.find("could not be asked") == std::string::npos);
    CHECK(sleepers(311).empty());
  }
  gpulab::cli::set_mpi_remote_hosts({});
  unsetenv("OMPI_MCA_plm_rsh_args");
  // MPI across the nodes over ssh: the ping-pong's all-reduce, exact on both ranks.
  const auto pp = gpulab::cli::run_mpi(2, paths.root / "logs-pp", {cluster.pingpong}, cluster.options);
  INFO(pp.process.output + (pp.rank_output.empty() ? "" : pp.rank_output[0]));
  CHECK(pp.process.exited(0));
  CHECK((pp.rank_output.empty() ? "" : pp.rank_output[0]).find("allreduce_exact 2") != std::string::npos);
  // The checks before a --hostfile grade, against the real sshds: every host answers and sees the
  // tree; a host that does not exist is named, within the timeout, never a hang.
  setenv("OMPI_MCA_plm_rsh_args", ("-F " + (ssh_dir / "ssh_config").string()).c_str(), 1);
  std::string error;
  const auto hosts = gpulab::cli::parse_hostfile(gpulab::cli::cluster_hostfile(p), error);
  const fs::path shared = paths.root / "probe-file";
  gpulab::cli::write_text(shared, "probe-file\n");
  CHECK(gpulab::cli::hostfile_problem(hosts, shared).empty());
  CHECK(gpulab::cli::hostfile_problem(hosts, paths.root / "not-there").find("does not see") != std::string::npos);
  const std::string unreachable = gpulab::cli::hostfile_problem({{"gplssh-n0", 1}, {"10.213.7.99", 1}}, shared);
  CHECK(unreachable.find("host 10.213.7.99") != std::string::npos);
  // Processes a run left on a host are found over ssh by the run's marker and killed: a sleeper
  // carrying one, on node 1's network (the nodes share this machine's /proc: node 0 sees the
  // process and leaves it, as it is not on its network).
  (void)gpulab::cli::start_daemon({"ip", "netns", "exec", p.node(1), "sh", "-c", "GPULAB_MPI_RUN=4242-7 setsid sleep 317 >/dev/null 2>&1 &"});
  for (int i = 0; i < 50 && sleepers(317).empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto ssh_to = [](std::vector<std::string> hosts) {
    gpulab::cli::RemoteHosts r;
    r.via = gpulab::cli::RemoteHosts::Via::kSsh;
    r.hosts = std::move(hosts);
    return r;
  };
  // Asked alone, node 0 sees it only on another network, as a process in a container would be:
  // said, not killed. Both nodes asked: node 1 kills it, and nothing else is said.
  std::vector<std::string> unasked, in_a_container;
  const auto not_here = gpulab::cli::remote_leftovers(ssh_to({"gplssh-n0"}), "4242-7", &in_a_container);
  const auto left = gpulab::cli::remote_leftovers(ssh_to({"gplssh-n0", "gplssh-n1"}), "4242-7", &unasked);
  for (int pid : sleepers(317)) kill(pid, SIGKILL);  // whatever the checks below say, nothing stays
  CHECK(not_here.empty());
  REQUIRE(in_a_container.size() == 1);
  CHECK(in_a_container[0].find("gplssh-n0: process ") == 0);
  CHECK(in_a_container[0].find("in another network namespace (a container?): not killed") != std::string::npos);
  CHECK(unasked.empty());
  REQUIRE(left.size() == 1);
  CHECK(left[0].rfind("gplssh-n1:", 0) == 0);
  CHECK(gpulab::cli::remote_leftovers(ssh_to({"gplssh-n1"}), "4242-7").empty());  // killed the first time
  (void)gpulab::cli::remote_leftovers(ssh_to({"gplssh-n1"}), "1; reboot", &unasked);
  REQUIRE(unasked.size() == 1);
  CHECK(unasked.front().find("not one of run_mpi's") != std::string::npos);
  const auto nowhere = gpulab::cli::remote_leftovers(ssh_to({"10.213.7.99"}), "4242-7", &unasked);
  CHECK(nowhere.empty());  // a host that cannot be asked is not a leftover: it is said
  CHECK(unasked.back().find("10.213.7.99 could not be asked") != std::string::npos);
  // A whole grade over the hostfile, as on a cluster: lab 07's reference, its exactness case.
  gpulab::cli::ProcessOptions g;
  g.timeout_s = 240;
  g.env["OMPI_MCA_plm_rsh_args"] = "-F " + (ssh_dir / "ssh_config").string();
  const auto graded = gpulab::cli::run_process({std::string(GPULAB_BIN_DIR) + "/gpulab-cli", "grade", "07", "--solutions", "--hostfile", (ssh_dir / "hostfile").string(),
                                                "--ranks", "2", "3", "--case", "ring_allreduce is exact on integers and identical on every rank"}, g);
  INFO(graded.output);
  CHECK(graded.exited(0));
  CHECK(graded.output.find("over ssh: 3 hosts") != std::string::npos);
  CHECK(graded.output.find("the transport OpenMPI chose (its own selection messages): pml ob1, btl tcp") != std::string::npos);
  for (const char* w : {"2", "3"}) {  // on 2 of the hosts, then on all 3
    CHECK(graded.output.find(std::string("PASS      [cpu] ring_allreduce is exact on integers and identical on every rank (W=") + w + ")") != std::string::npos);
  }
  // A submission that hangs (lab 07's plant whose rank 1 never sends) graded over the hostfile:
  // killed at its limit, each rank that had not ended named with its host, nothing left anywhere.
  const fs::path hangs = never_sends_submission(paths.root);
  const auto hung_grade = gpulab::cli::run_process({std::string(GPULAB_BIN_DIR) + "/gpulab-cli", "grade", "07", "--submission", hangs.string(), "--hostfile",
                                                    (ssh_dir / "hostfile").string(), "--ranks", "2", "--timeout", "8", "--case",
                                                    "ring_allreduce is exact on integers and identical on every rank"}, g);
  INFO(hung_grade.output);
  CHECK(hung_grade.exited(1));
  CHECK(hung_grade.output.find("every rank was killed") != std::string::npos);
  CHECK(hung_grade.output.find("still running at the time limit (stopped then): rank 0 (on gplssh-n0), rank 1 (on gplssh-n1)") != std::string::npos);
  CHECK(hung_grade.output.find("still running afterwards") == std::string::npos);
  CHECK(hung_grade.output.find("could not be asked") == std::string::npos);
  unsetenv("OMPI_MCA_plm_rsh_args");
  // down: the sshds were processes in the namespaces; nothing of them, or of the files, is left.
  CHECK(gpulab::cli::cluster_command(paths, "down", p) == 0);
  CHECK(gpulab::cli::discover_cluster("gplssh").empty());
  CHECK_FALSE(fs::exists(ssh_dir));
  CHECK_FALSE(fs::exists(gpulab::cli::cluster_agent_path(paths)));  // nothing of what up wrote
  CHECK(gpulab::cli::processes_running(ssh_dir.string()).empty());
}

TEST_CASE("with slurm the controller sits on the bridge and each node is a slurmd of its own", "[cpu]") {
  ClusterPlan p;
  p.nodes = 2;
  p.with = "slurm";
  CHECK(gpulab::cli::check_plan(p).empty());
  const std::string conf = gpulab::cli::cluster_slurm_conf(p, "/x/slurm", 4);
  CHECK(conf.find("SlurmctldHost=gpulab-ctl(10.213.0.1)\n") != std::string::npos);
  CHECK(conf.find("NodeName=gpulab-n1 NodeAddr=10.213.0.11 CPUs=4 State=UNKNOWN\n") != std::string::npos);
  CHECK(conf.find("PartitionName=gpulab Nodes=ALL Default=YES") != std::string::npos);
  CHECK(conf.find("AuthInfo=socket=/x/slurm/munge.socket\n") != std::string::npos);  // a munged of the cluster's own
  CHECK(conf.find("SlurmdSpoolDir=/x/slurm/spool-%n\n") != std::string::npos);        // one per node, on one filesystem
  CHECK(conf.find("SlurmctldPort=6900\n") != std::string::npos);  // 6900 + the subnet's third number: never a real slurmctld's 6817
  p.subnet = "10.213.6";
  CHECK(p.slurmctld_port() == 6906);
}

TEST_CASE("lab 07's reference graded inside a Slurm allocation across three nodes and an allocation too small refused", "[cpu][cluster][slurm]") {
  ScratchCluster cluster("gplslurm", "10.213.6", "slurm", 3);
  REQUIRE(cluster.up);
  const fs::path slurm_dir = gpulab::cli::cluster_agent_path(cluster.paths).parent_path() / "slurm";
  gpulab::cli::ProcessOptions o;
  o.timeout_s = 300;
  o.env["SLURM_CONF"] = (slurm_dir / "slurm.conf").string();
  const std::string cli = std::string(GPULAB_BIN_DIR) + "/gpulab-cli";
  // The launcher is found from the allocation (SLURM_JOB_ID); OpenMPI starts its daemons by srun.
  const auto graded = gpulab::cli::run_process({"salloc", "-N", "3", "-n", "3", cli, "grade", "07", "--solutions", "--ranks", "2", "3", "--case",
                                                "ring_allreduce is exact on integers and identical on every rank"}, o);
  INFO(graded.output);
  CHECK(graded.exited(0));
  CHECK(graded.output.find("launcher: mpirun inside the Slurm allocation") != std::string::npos);
  CHECK(graded.output.find("3 nodes (") != std::string::npos);
  CHECK(graded.output.find("an all-reduce of 8 MiB of integers across the two nodes: exact") != std::string::npos);
  // Across the nodes for real: OpenMPI chose TCP between them, not shared memory on this host
  // (an mpirun kept off Slurm would have run every rank here, over vader).
  CHECK(graded.output.find("the transport OpenMPI chose (its own selection messages): pml ob1, btl tcp") != std::string::npos);
  for (const char* w : {"2", "3"}) {
    CHECK(graded.output.find(std::string("PASS      [cpu] ring_allreduce is exact on integers and identical on every rank (W=") + w + ")") != std::string::npos);
  }
  // What a run left on a node is found through srun, one task per node, by the run's marker: a
  // sleeper carrying one on node 1's network, found there, killed, and named with its node.
  setenv("SLURM_CONF", (slurm_dir / "slurm.conf").string().c_str(), 1);
  (void)gpulab::cli::start_daemon({"ip", "netns", "exec", cluster.plan.node(1), "sh", "-c", "GPULAB_MPI_RUN=4242-5 setsid sleep 323 >/dev/null 2>&1 &"});
  for (int i = 0; i < 50 && sleepers(323).empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  gpulab::cli::RemoteHosts by_srun;
  by_srun.via = gpulab::cli::RemoteHosts::Via::kSrun;
  by_srun.hosts = {cluster.plan.node(0), cluster.plan.node(1), cluster.plan.node(2)};
  std::vector<std::string> unasked;
  const auto left = gpulab::cli::remote_leftovers(by_srun, "4242-5", &unasked);
  for (int pid : sleepers(323)) kill(pid, SIGKILL);
  unsetenv("SLURM_CONF");
  {
    std::string said;
    for (const std::string& u : unasked) said += u + "; ";
    INFO(said);
    CHECK(unasked.empty());
    REQUIRE(left.size() == 1);
    CHECK(left[0].rfind(cluster.plan.node(1) + ":", 0) == 0);
  }
  // A rank killed inside the allocation (--fault kill:1), found on its node through srun by the
  // run's marker; the submission hangs without it (rank 1 never sends), so the kill always lands.
  const auto killed = gpulab::cli::run_process({"salloc", "-N", "2", "-n", "2", cli, "grade", "07", "--submission", never_sends_submission(cluster.paths.root).string(),
                                                "--ranks", "2", "--timeout", "30", "--fault", "kill:1@1", "--case",
                                                "ring_allreduce is exact on integers and identical on every rank"}, o);
  INFO(killed.output);
  CHECK(killed.exited(1));
  CHECK(killed.output.find("rank 1 (pid ") != std::string::npos);
  CHECK(killed.output.find(" on gplslurm-n") != std::string::npos);
  CHECK(killed.output.find(") was killed") != std::string::npos);
  CHECK(killed.output.find("the grader injected this fault") != std::string::npos);
  CHECK(killed.output.find("could not be asked") == std::string::npos);
  CHECK(killed.output.find("still running afterwards") == std::string::npos);
  const auto cut = gpulab::cli::run_process({"salloc", "-N", "2", "-n", "2", cli, "grade", "07", "--solutions", "--ranks", "2", "--fault", "link-down:1@1"}, o);
  INFO(cut.output);
  CHECK(cut.exited(2));
  CHECK(cut.output.find("a real cluster's links are not the grader's to cut") != std::string::npos);
  const auto small = gpulab::cli::run_process({"salloc", "-N", "2", cli, "grade", "07", "--solutions", "--ranks", "4", "--case",
                                               "ring_allreduce is exact on integers and identical on every rank"}, o);
  INFO(small.output);
  CHECK(small.exited(2));
  CHECK(small.output.find("the allocation has 2 tasks and lab 07 runs up to 4 ranks") != std::string::npos);
  // An allocation srun does not know (a job that has ended, a controller that is not this one's):
  // one line, exit 2, no grade.
  gpulab::cli::ProcessOptions stale = o;
  stale.env["SLURM_JOB_ID"] = "424242";
  stale.env["SLURM_NNODES"] = "2";
  stale.env["SLURM_NTASKS"] = "2";
  const auto refused = gpulab::cli::run_process({cli, "grade", "07", "--solutions", "--launcher", "slurm", "--ranks", "2"}, stale);
  INFO(refused.output);
  CHECK(refused.exited(2));
  CHECK(refused.output.find("srun across the allocation failed") != std::string::npos);
  CHECK(refused.output.find("is munge running on every node?") != std::string::npos);
  // down: the controller and munge stopped, the slurmds gone with the nodes, the files removed.
  CHECK(gpulab::cli::cluster_command(cluster.paths, "down", cluster.plan) == 0);
  CHECK(gpulab::cli::discover_cluster("gplslurm").empty());
  CHECK_FALSE(fs::exists(slurm_dir));
  CHECK(gpulab::cli::processes_running(slurm_dir.string()).empty());
}

TEST_CASE("the transport that ran is read back from OpenMPI's own selection messages", "[cpu]") {
  const std::string ob1 =
      "[vm:10166] select: initializing pml component ob1\n[vm:10166] selected ob1 best priority 20\n[vm:10166] select: component ob1 selected\n"
      "[vm:10165] mca: bml: Using vader btl for send to [[19281,1],1] on node vm\n"
      "[vm:10165] mca: bml: Using self btl for send to [[19281,1],0] on node vm\n"
      "[n0:1] mca: bml: Using tcp btl for send to [[19281,1],2] on node n1\n";
  CHECK(gpulab::cli::transport_that_ran(ob1) == "pml ob1, btl tcp, vader");
  CHECK(gpulab::cli::transport_that_ran("[ib01:7] select: component ucx selected\n") == "pml ucx");
  CHECK(gpulab::cli::transport_that_ran("alpha_us 3.1\n").empty());
}

TEST_CASE("each rank's host is read from mpirun's display map", "[cpu]") {
  const std::string map =
      " Data for JOB [12965,1] offset 0 Total slots allocated 2\n\n ========================   JOB MAP   ========================\n\n"
      " Data for node: gpulab-n0\tNum slots: 1\tMax slots: 0\tNum procs: 2\n"
      " \tProcess OMPI jobid: [12965,1] App: 0 Process rank: 0 Bound: N/A\n"
      " \tProcess OMPI jobid: [12965,1] App: 0 Process rank: 2 Bound: N/A\n\n"
      " Data for node: gpulab-n1\tNum slots: 1\tMax slots: 0\tNum procs: 1\n"
      " \tProcess OMPI jobid: [12965,1] App: 0 Process rank: 1 Bound: N/A\n";
  const auto hosts = gpulab::cli::parse_display_map(map);
  CHECK(hosts == std::map<int, std::string>{{0, "gpulab-n0"}, {1, "gpulab-n1"}, {2, "gpulab-n0"}});
  CHECK(gpulab::cli::parse_display_map("[1,0]<stdout>:alpha_us 3\n").empty());
  // One node: no map is asked for (the local command line stays as it was).
  const auto local = gpulab::cli::mpirun_argv(2, "/x/logs", {"prog"});
  CHECK(std::find(local.begin(), local.end(), "--display-map") == local.end());
}

TEST_CASE("faults are parsed from link-down:NODE@SECONDS and kill:RANK@SECONDS", "[cpu]") {
  std::string error;
  const auto a = gpulab::cli::parse_fault("kill:2@1.5", error);
  CHECK(a.kind == gpulab::cli::MpiFault::Kind::kKill);
  CHECK(a.target == 2);
  CHECK(a.at_s == 1.5);
  const auto b = gpulab::cli::parse_fault("link-down:0@3", error);
  CHECK(b.kind == gpulab::cli::MpiFault::Kind::kLinkDown);
  CHECK(b.target == 0);
  CHECK(gpulab::cli::parse_fault("link-down:x@3", error).target < 0);
  CHECK(error.find("expected link-down:NODE@SECONDS") != std::string::npos);
  CHECK(gpulab::cli::parse_fault("kill:1", error).target < 0);
}

TEST_CASE("a killed rank and a cut link are reported by rank and node and leave no process", "[cpu][cluster]") {
  ScratchCluster cluster("gplfault", "10.213.8");
  REQUIRE(cluster.up);
  const gpulab::cli::Paths& paths = cluster.paths;
  const ClusterPlan& p = cluster.plan;
  const std::string& pingpong = cluster.pingpong;
  const gpulab::cli::ProcessOptions& o = cluster.options;
  auto contains = [](const std::vector<std::string>& lines, const std::string& text) {
    for (const std::string& l : lines) {
      if (l.find(text) != std::string::npos) return true;
    }
    return false;
  };
  {
    std::string error;
    gpulab::cli::set_mpi_faults({gpulab::cli::parse_fault("kill:1@1", error)});
    const auto run = gpulab::cli::run_mpi(2, paths.root / "logs-kill", {pingpong}, o);
    std::string said;
    for (const std::string& l : run.problems) said += l + "; ";
    INFO(said);
    CHECK_FALSE(run.process.exited(0));
    CHECK(contains(run.problems, " s: rank 1 (pid"));  // the time it was found and killed (it may still be starting at 1 s)
    CHECK(contains(run.problems, "fault injected at "));
    CHECK(run.process.seconds < 25.0);
    CHECK(run.leftovers.empty());
  }
  {
    // A run that ends before its fault is judged on its own: the fault is a note, not a problem.
    std::string error;
    gpulab::cli::set_mpi_faults({gpulab::cli::parse_fault("kill:1@3", error)});
    const auto run = gpulab::cli::run_mpi(2, paths.root / "logs-early", {"true"}, o);
    CHECK(run.process.exited(0));
    CHECK(run.problems.empty());
    CHECK(contains(run.notes, "fault not injected: the run ended before 3.0 s"));
  }
  {
    gpulab::cli::MpiFault cut;
    cut.kind = gpulab::cli::MpiFault::Kind::kLinkDown;
    cut.target = 1;
    cut.at_s = 1.0;
    cut.link = p.bridge_side(1);
    cut.node = p.node(1);
    gpulab::cli::set_mpi_faults({cut});
    // A limit of 6 s, under the fault's own cap (its time + 20 s): the cut is found as soon.
    gpulab::cli::ProcessOptions shorter = o;
    shorter.timeout_s = 6;
    const auto run = gpulab::cli::run_mpi(2, paths.root / "logs-cut", {pingpong}, shorter);
    std::string said;
    for (const std::string& l : run.problems) said += l + "; ";
    INFO(said);
    CHECK_FALSE(run.process.exited(0));
    CHECK(contains(run.problems, "fault injected at 1.0 s: the link of gplfault-n1 was cut"));
    CHECK(run.process.seconds < 6.0 + 5.0);
    CHECK(run.leftovers.empty());
  }
  // Nothing runs inside the namespaces any more, and down removes them.
  for (int i = 0; i < 2; ++i) CHECK(gpulab::cli::run_process({"ip", "netns", "pids", p.node(i)}).output.empty());
  CHECK(gpulab::cli::cluster_command(paths, "down", p) == 0);
  CHECK(gpulab::cli::discover_cluster("gplfault").empty());
}
