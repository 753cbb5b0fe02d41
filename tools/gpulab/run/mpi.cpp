/// @file mpi.cpp
/// @brief mpirun with a time limit, per-rank output and launcher diagnostics.
#include "run/mpi.hpp"
#include "run/cluster.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

extern char** environ;

namespace gpulab::cli {

namespace {
std::vector<std::string>& placement() {
  static std::vector<std::string> args;
  return args;
}
RemoteHosts& remote_hosts() {
  static RemoteHosts remote;
  return remote;
}
bool& forced_transport() {
  static bool forced = true;
  return forced;
}

/// What one command of capture_all printed, and how it ended: its exit code, or -1 when it could
/// not start, was stopped (its time limit, or @p stop) or was reaped by someone else.
struct Captured {
  int code = -1;
  std::string output;
};

/// Runs each of @p commands (searched in PATH) at once, standard input from /dev/null, output
/// captured, for @p timeout_s at most, or until *@p stop turns true: then SIGTERM (srun cancels
/// its step on it), and SIGKILL 3 s later. posix_spawn and poll only, so any thread may call it,
/// unlike run_process (the main thread's, with its signal handling and subreaper). A child is
/// signalled through a pidfd where the kernel has them: run_process's sweep of descendants may
/// reap it first (it is then "reaped by someone else", never a stranger under a reused pid).
std::vector<Captured> capture_all(const std::vector<std::vector<std::string>>& commands, double timeout_s, const std::atomic<bool>* stop = nullptr) {
  struct Child {
    pid_t pid = 0;
    int pidfd = -1;
    int out = -1;
  };
  std::vector<Captured> results(commands.size());
  std::vector<Child> children(commands.size());
  for (std::size_t i = 0; i < commands.size(); ++i) {
    int fds[2];
    if (commands[i].empty() || pipe2(fds, O_CLOEXEC) != 0) continue;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
    std::vector<char*> args;
    for (const std::string& a : commands[i]) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = 0;
    const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (spawned != 0) {
      close(fds[0]);
      continue;
    }
    children[i] = {pid, static_cast<int>(syscall(SYS_pidfd_open, pid, 0)), fds[0]};
  }
  auto signal_all = [&](int sig) {
    for (const Child& c : children) {
      if (c.out < 0) continue;
      if (c.pidfd >= 0) {
        (void)syscall(SYS_pidfd_send_signal, c.pidfd, sig, nullptr, 0);
      } else {
        kill(c.pid, sig);
      }
    }
  };
  const auto start = std::chrono::steady_clock::now();
  double stop_at = timeout_s, kill_at = -1;
  bool stopped = false;
  char buffer[4096];
  for (;;) {
    std::vector<pollfd> open;
    std::vector<std::size_t> which;
    for (std::size_t i = 0; i < children.size(); ++i) {
      if (children[i].out < 0) continue;
      open.push_back({children[i].out, POLLIN, 0});
      which.push_back(i);
    }
    if (open.empty()) break;
    const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!stopped && (now >= stop_at || (stop != nullptr && stop->load()))) {
      signal_all(SIGTERM);
      stopped = true;
      kill_at = now + 3;
    }
    if (stopped && kill_at >= 0 && now >= kill_at) {
      signal_all(SIGKILL);
      kill_at = -1;
    }
    if (poll(open.data(), open.size(), 100) < 0 && errno != EINTR) break;
    for (std::size_t k = 0; k < open.size(); ++k) {
      if (open[k].revents == 0) continue;
      Child& c = children[which[k]];
      const ssize_t n = read(c.out, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        close(c.out);
        c.out = -1;
        continue;
      }
      std::string& output = results[which[k]].output;
      if (output.size() < (1u << 20)) output.append(buffer, static_cast<std::size_t>(n));
    }
  }
  for (std::size_t i = 0; i < children.size(); ++i) {
    Child& c = children[i];
    if (c.pid <= 0) continue;
    int status = 0;
    pid_t got;
    while ((got = waitpid(c.pid, &status, 0)) < 0 && errno == EINTR) {
    }
    if (c.pidfd >= 0) close(c.pidfd);
    if (c.out >= 0) close(c.out);
    results[i].code = got == c.pid && !stopped && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  return results;
}

/// One line of @p text at most 200 bytes, for a message.
std::string said_briefly(const std::string& text) {
  std::string s = text.substr(0, 200);
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s.empty() ? "nothing said" : s;
}

/// Whether @p output has a line "done" (the scripts' last word: the host ran the whole script).
bool said_done(const std::string& output) {
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line == "done") return true;
  }
  return false;
}
}  // namespace

void set_mpi_remote_hosts(RemoteHosts remote) { remote_hosts() = std::move(remote); }

std::vector<HostAnswer> run_on_hosts(const RemoteHosts& remote, const std::string& script, std::vector<std::string>* unasked, const std::atomic<bool>* stop) {
  std::vector<HostAnswer> answers;
  // At most 15 s on any host: a grep of /proc can block on a process stuck in the kernel (a hung
  // driver or filesystem, when grades do fail), and the next run must not pile up behind it.
  const std::string bounded = "timeout -k 2 15 sh -c " + shell_quote(script);
  if (remote.via == RemoteHosts::Via::kSsh) {
    std::vector<std::vector<std::string>> commands;
    for (const std::string& host : remote.hosts) commands.push_back(probe_ssh_argv(host, bounded));
    const std::vector<Captured> said = capture_all(commands, 20, stop);  // every host at once
    for (std::size_t i = 0; i < said.size(); ++i) {
      if (said[i].code == 0 && said_done(said[i].output)) {
        answers.push_back({remote.hosts[i], said[i].output});
      } else if (unasked != nullptr) {
        unasked->push_back(remote.hosts[i] + " could not be asked over ssh (" +
                           (said[i].code < 0 ? "no answer within 20 s" : "exit " + std::to_string(said[i].code)) + ": " + said_briefly(said[i].output) + ")");
      }
    }
  } else if (remote.via == RemoteHosts::Via::kSrun) {
    // One task per node of the allocation, beside whatever step runs there (--overlap), each of
    // its lines tagged with the node's name.
    const std::string nodes = std::to_string(remote.hosts.size());
    const std::string tagged = "h=$(hostname); { " + bounded + "; } 2>&1 | while IFS= read -r l; do echo \"gpulab-node $h $l\"; done";
    const Captured said = capture_all({{"srun", "--overlap", "-N", nodes, "-n", nodes, "--ntasks-per-node=1", "sh", "-c", tagged}}, 30, stop).front();
    std::map<std::string, std::string> by_node;
    std::istringstream lines(said.output);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("gpulab-node ", 0) != 0) continue;  // srun's own notes
      line.erase(0, 12);
      const std::size_t space = line.find(' ');
      if (space == std::string::npos) continue;
      by_node[line.substr(0, space)] += line.substr(space + 1) + "\n";
    }
    for (const std::string& node : remote.hosts) {
      const auto it = by_node.find(node);
      if (it != by_node.end() && said_done(it->second)) {
        answers.push_back({node, it->second});
      } else if (unasked != nullptr) {
        unasked->push_back(node + " could not be asked through srun (" + (said.code < 0 ? "no answer within 30 s" : "exit " + std::to_string(said.code)) +
                           ": " + said_briefly(said.output) + ")");
      }
    }
  }
  return answers;
}

std::string marked_kill_script(const std::string& marker_value, int rank, const std::string& program, bool kill_them) {
  // A marker is digits and a dash (run_mpi's): nothing the remote shell could read as code.
  if (marker_value.empty() || marker_value.find_first_not_of("0123456789-") != std::string::npos) return "";
  if (rank >= 0 && program.empty()) return "";
  // A process on another network is another node's (the cluster of namespaces shares one /proc),
  // or in a container of its own: said as "other PID", never touched.
  std::string test = "[ \"$(readlink /proc/$p/ns/net)\" = \"$me\" ] || { echo \"other $p\"; continue; }; ";
  if (rank >= 0) {
    test = "[ \"$(readlink /proc/$p/ns/net)\" = \"$me\" ] || continue; "
           "grep -qsxz 'OMPI_COMM_WORLD_RANK=" + std::to_string(rank) + "' \"$f\" || continue; " +
           "[ \"$(tr '\\0' '\\n' < /proc/$p/cmdline | head -n 1)\" = " + shell_quote(program) + " ] || continue; ";
  }
  const std::string act = kill_them ? "kill -9 \"$p\" && echo \"killed $p\"" : "echo \"found $p\"";
  // One grep over every process's environment (NUL-separated entries, each matched whole).
  return "me=$(readlink /proc/self/ns/net); for f in $(grep -lsxz 'GPULAB_MPI_RUN=" + marker_value +
         "' /proc/[0-9]*/environ); do p=${f#/proc/}; p=${p%/environ}; " + test + act + "; done; echo done";
}

namespace {
/// The pids after @p word ("killed", "found", "other") in a host's answer.
std::vector<std::string> said_pids(const std::string& output, const std::string& word) {
  std::vector<std::string> pids;
  std::istringstream words(output);
  for (std::string w, pid; words >> w;) {
    if (w == word && words >> pid) pids.push_back(pid);
  }
  return pids;
}
}  // namespace

std::vector<std::string> remote_leftovers(const RemoteHosts& remote, const std::string& marker_value, std::vector<std::string>* unasked) {
  std::vector<std::string> found;
  const std::string look = marked_kill_script(marker_value, -1, "", false);
  if (look.empty()) {
    if (unasked != nullptr) unasked->push_back("the marker \"" + marker_value + "\" is not one of run_mpi's: no host was asked");
    return found;
  }
  // First only look: the ranks' daemons may still be ending them (ORTE's teardown after mpirun
  // was stopped). Whatever is still there 2 s later is left behind, and killed.
  bool any = false;
  for (const HostAnswer& a : run_on_hosts(remote, look, unasked)) any = any || !said_pids(a.output, "found").empty() || !said_pids(a.output, "other").empty();
  if (!any) return found;
  std::this_thread::sleep_for(std::chrono::seconds(2));
  std::set<std::string> killed, elsewhere;
  std::map<std::string, std::string> host_of_other;
  for (const HostAnswer& a : run_on_hosts(remote, marked_kill_script(marker_value), unasked)) {
    for (const std::string& pid : said_pids(a.output, "killed")) {
      found.push_back(a.host + ":" + pid);
      killed.insert(pid);
    }
    for (const std::string& pid : said_pids(a.output, "other")) host_of_other.emplace(pid, a.host);
  }
  // Seen only on another network by every host that saw it: in a container of its own network,
  // which the scan does not touch (on this machine's cluster of namespaces its own node kills it).
  for (const auto& [pid, host] : host_of_other) {
    if (!killed.count(pid) && unasked != nullptr) {
      unasked->push_back(host + ": process " + pid + " carries the run's marker in another network namespace (a container?): not killed");
    }
  }
  return found;
}

void set_mpi_placement(std::vector<std::string> args, bool force_transport) {
  placement() = std::move(args);
  forced_transport() = force_transport;
}

namespace {
std::vector<MpiFault>& faults() {
  static std::vector<MpiFault> f;
  return f;
}

/// Runs a short command from the fault thread (not run_process: that one is the main thread's).
bool spawn_and_wait(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0) return false;
  int status = 0;
  return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/// Whether process @p pid's environment holds the entry @p entry ("NAME=value").
bool environment_has(int pid, const std::string& entry) {
  std::string env;
  try {
    env = read_text("/proc/" + std::to_string(pid) + "/environ");
  } catch (...) {
    return false;
  }
  std::size_t at = 0;
  for (std::size_t end; (end = env.find('\0', at)) != std::string::npos; at = end + 1) {
    if (env.compare(at, end - at, entry) == 0) return true;
  }
  return false;
}

/// The pid of the process of this run (@p marker in its environment) running @p program as MPI
/// rank @p rank, or 0: another grade's ranks on the same machine are never touched.
int pid_of_rank(const std::string& program, const std::string& marker, int rank) {
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  for (int pid : processes_running(program)) {
    // The program itself, not gpulab-launch, whose command line names it too.
    std::string cmdline;
    try {
      cmdline = read_text("/proc/" + std::to_string(pid) + "/cmdline");
    } catch (...) {
      continue;
    }
    if (cmdline.substr(0, cmdline.find('\0')) != program) continue;
    if (environment_has(pid, marker) && environment_has(pid, want)) return pid;
  }
  return 0;
}

/// Applies the faults at their times while mpirun runs; stops early when told.
class FaultInjector {
 public:
  FaultInjector(std::vector<MpiFault> faults, std::string program, std::string marker_value, RemoteHosts remote)
      : faults_(std::move(faults)), program_(std::move(program)), marker_value_(std::move(marker_value)), remote_(std::move(remote)) {
    std::sort(faults_.begin(), faults_.end(), [](const MpiFault& a, const MpiFault& b) { return a.at_s < b.at_s; });
    thread_ = std::thread([this] { run(); });
  }
  /// Stops, puts cut links back up, and returns what was done ("at 1.0 s: rank 1 (pid 42) was killed").
  /// A run that ended by an exception (the grade interrupted) still stops the thread.
  ~FaultInjector() {
    if (thread_.joinable()) stop();
  }
  std::vector<std::string> finish() {
    stop();
    for (const MpiFault& f : faults_) {
      if (f.kind == MpiFault::Kind::kLinkDown) (void)spawn_and_wait({"ip", "link", "set", f.link, "up"});
    }
    for (std::size_t i = applied_; i < faults_.size(); ++i) {
      char text[120];
      std::snprintf(text, sizeof text, "fault not injected: the run ended before %.1f s", faults_[i].at_s);
      events_.push_back(text);
    }
    return events_;
  }

 private:
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      stopping_ = true;  // also ends a remote search under way (capture_all watches it)
    }
    wake_.notify_all();
    thread_.join();
  }
  void run() {
    const auto start = std::chrono::steady_clock::now();
    for (const MpiFault& f : faults_) {
      std::unique_lock<std::mutex> lock(mutex_);
      if (wake_.wait_until(lock, start + std::chrono::duration<double>(f.at_s), [this] { return stop_; })) return;
      lock.unlock();
      ++applied_;
      char when[32];
      std::snprintf(when, sizeof when, "at %.1f s: ", f.at_s);
      if (f.kind == MpiFault::Kind::kLinkDown) {
        const bool ok = spawn_and_wait({"ip", "link", "set", f.link, "down"});
        events_.push_back(std::string("fault injected ") + when + "the link of " + f.node + " was cut" + (ok ? "" : " (ip link set down FAILED)"));
      } else {
        // The rank may still be starting (a launch across namespaces or hosts takes a moment):
        // look for it for up to 10 s more, less often on a real cluster (each look there is an
        // ssh to every host or an srun step).
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        const auto pause = std::chrono::milliseconds(remote_.via == RemoteHosts::Via::kNone ? 100 : 500);
        std::string killed;
        std::vector<std::string> unasked;
        bool ended = false;  // the run ended while the rank was looked for
        for (bool first = true; killed.empty() && !ended && std::chrono::steady_clock::now() < give_up; first = false) {
          if (!first) {
            std::unique_lock<std::mutex> wait(mutex_);
            if (wake_.wait_for(wait, pause, [this] { return stop_; })) ended = true;
          }
          if (ended) break;
          unasked.clear();
          killed = kill_rank(f.target, unasked);
          if (killed.empty() && stopping_.load()) ended = true;  // a search the run's end cut short
        }
        std::snprintf(when, sizeof when, "at %.1f s: ", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        if (ended) {
          std::snprintf(when, sizeof when, "%.1f s", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
          events_.push_back(std::string("fault not injected: the run ended at ") + when + ", before rank " + std::to_string(f.target) + " was found");
          continue;
        }
        std::string none = " was not found running: nothing killed";
        for (const std::string& u : unasked) none += "; " + u;
        events_.push_back(std::string("fault injected ") + when + "rank " + std::to_string(f.target) + (killed.empty() ? none : " (" + killed + ") was killed"));
      }
    }
  }
  /// Kills rank @p rank of this run where it runs: "pid 42" here, "pid 42 on HOST" on a real
  /// cluster's host; "" when it is not running (yet).
  std::string kill_rank(int rank, std::vector<std::string>& unasked) {
    if (remote_.via == RemoteHosts::Via::kNone) {
      const int pid = pid_of_rank(program_, "GPULAB_MPI_RUN=" + marker_value_, rank);
      if (pid <= 0) return "";
      kill(pid, SIGKILL);
      return "pid " + std::to_string(pid);
    }
    for (const HostAnswer& a : run_on_hosts(remote_, marked_kill_script(marker_value_, rank, program_), &unasked, &stopping_)) {
      for (const std::string& pid : said_pids(a.output, "killed")) return "pid " + pid + " on " + a.host;
    }
    return "";
  }
  std::vector<MpiFault> faults_;
  std::string program_, marker_value_;
  RemoteHosts remote_;
  std::vector<std::string> events_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::atomic<bool> stopping_{false};
  std::size_t applied_ = 0;  ///< faults whose time came while the run was on
  std::thread thread_;
};
}  // namespace

MpiFault parse_fault(const std::string& text, std::string& error) {
  static const std::regex form(R"(^(link-down|kill):([0-9]+)@([0-9]+(\.[0-9]+)?)$)");
  std::smatch m;
  MpiFault f;
  if (!std::regex_match(text, m, form)) {
    error = "--fault \"" + text + "\": expected link-down:NODE@SECONDS or kill:RANK@SECONDS (e.g. kill:1@2.5)";
    f.target = -1;
    return f;
  }
  f.kind = m[1] == "kill" ? MpiFault::Kind::kKill : MpiFault::Kind::kLinkDown;
  f.target = std::stoi(m[2]);
  f.at_s = std::stod(m[3]);
  return f;
}

void set_mpi_faults(std::vector<MpiFault> f) { faults() = std::move(f); }
std::vector<MpiFault> mpi_faults() { return faults(); }

std::vector<std::string> mpi_exports(const std::map<std::string, std::string>& env) {
  std::set<std::string> names;
  for (const auto& [key, value] : env) names.insert(key);
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("GPULAB_", 0) == 0) names.insert(entry.substr(0, entry.find('=')));
  }
  return {names.begin(), names.end()};
}

std::vector<std::string> mpirun_argv(int ranks, const fs::path& logs, const std::vector<std::string>& command, const std::vector<std::string>& exports) {
  std::vector<std::string> argv = {"mpirun", "-np", std::to_string(ranks), "--oversubscribe"};
  // Across a cluster (grade --nodes, --hostfile): its hosts and launcher, and for the cluster of
  // namespaces TCP on its subnet.
  argv.insert(argv.end(), placement().begin(), placement().end());
  // One node, shared memory: OpenMPI's ob1 messaging (the vader transport, 4 KiB eager limit) on
  // every machine, so that what the tests rely on (a larger send is not complete before its
  // receive is posted) holds even where UCX would be chosen for a network card. On a real
  // cluster (--hostfile) the cluster's own choice stands.
  if (forced_transport()) argv.insert(argv.end(), {"--mca", "pml", "ob1"});
  // On this machine only, even inside a Slurm allocation (a batch job of one node): OpenMPI would
  // otherwise take the allocation's nodes from Slurm and start its daemons there with srun. Not
  // for --launcher slurm (no placement, the transport unforced), which wants exactly that.
  if (placement().empty() && forced_transport() && std::getenv("SLURM_JOB_ID") != nullptr) argv.insert(argv.end(), {"--mca", "plm", "^slurm", "--mca", "ras", "^slurm"});
  // Across hosts (a cluster, the namespaces, an allocation): mpirun prints where each rank goes,
  // so that a rank that sent nothing can be named with its host.
  if (!placement().empty() || !forced_transport()) argv.push_back("--display-map");
  // What the ranks must see of the grader's environment (the run's token, seed, report paths),
  // exported by name: a rank started over ssh inherits nothing from mpirun's environment.
  for (const std::string& name : exports) argv.insert(argv.end(), {"-x", name});
  if (geteuid() == 0) argv.push_back("--allow-run-as-root");
  // Each rank's output goes to its own files, and to mpirun's output tagged "[job,rank]<stdout>:"
  // at each piece: the grader reads each rank's stream from there, in the order it was written
  // (a file could be rewritten afterwards by another rank; a pipe cannot).
  argv.insert(argv.end(), {"--output-filename", logs.string(), "--tag-output"});
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

/// The MPI transport that ran, from OpenMPI's own selection messages (pml_base_verbose and
/// btl_base_verbose at 10): "pml ob1, btl tcp between hosts and vader within one" style, or "".
std::string transport_that_ran(const std::string& output) {
  static const std::regex pml(R"(select: component (\w+) selected)");
  static const std::regex btl(R"(Using (\w+) btl for send to \S+ on node (\S+))");
  std::smatch m;
  std::string said;
  if (std::regex_search(output, m, pml)) said = "pml " + m[1].str();
  std::set<std::string> btls;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), btl); it != std::sregex_iterator(); ++it) {
    if ((*it)[1] != "self") btls.insert((*it)[1]);
  }
  if (!btls.empty()) {
    std::string list;
    for (const std::string& b : btls) list += (list.empty() ? "" : ", ") + b;
    said += (said.empty() ? "" : ", ") + std::string("btl ") + list;
  }
  return said;
}

std::map<int, std::string> parse_display_map(const std::string& output) {
  static const std::regex node(R"(Data for node: (\S+))");
  static const std::regex rank(R"(Process rank: (\d+))");
  std::map<int, std::string> hosts;
  std::istringstream lines(output);
  std::string current;
  std::smatch m;
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_search(line, m, node)) current = m[1];
    else if (!current.empty() && std::regex_search(line, m, rank)) hosts[std::stoi(m[1])] = current;
  }
  return hosts;
}

std::vector<std::string> launcher_problems(const std::string& out) {
  std::vector<std::string> problems;
  std::smatch m;
  static const std::regex signal(R"(process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+) \(([^)]*)\))");
  static const std::regex abort_rank(R"(MPI_ABORT was invoked on rank (\d+))");
  static const std::regex improper(R"(process rank (\d+) with PID \d+ on\s+node \S+ exiting improperly)");
  static const std::regex finalize(R"(exited without calling "?finalize"?)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), signal); it != std::sregex_iterator(); ++it) {
    problems.push_back("rank " + (*it)[1].str() + " was killed by signal " + (*it)[2].str() + " (" + (*it)[3].str() + ")");
  }
  if (std::regex_search(out, m, abort_rank)) problems.push_back("rank " + m[1].str() + " called MPI_Abort");
  if (std::regex_search(out, m, improper)) {
    problems.push_back("rank " + m[1].str() + " exited without calling MPI_Finalize (it returned early or called exit)");
  } else if (std::regex_search(out, m, finalize)) {
    problems.push_back("a rank exited without calling MPI_Finalize (it returned early or called exit)");
  }
  return problems;
}

std::vector<int> processes_running(const std::string& program) {
  std::vector<int> pids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const int pid = std::stoi(name);
    if (pid == getpid()) continue;
    std::string cmdline;
    try {
      cmdline = read_text(entry.path() / "cmdline");
    } catch (...) {
      continue;
    }
    if (cmdline.find(program) != std::string::npos) {
      std::string state;
      try {
        const std::string stat = read_text(entry.path() / "stat");
        state = stat.substr(stat.rfind(')') + 2, 1);
      } catch (...) {
      }
      if (state != "Z") pids.push_back(pid);
    }
  }
  return pids;
}

namespace {
std::string launched_program(const std::vector<std::string>& command) {
  if (command.empty()) return "";
  // gpulab-launch [options] -- PROGRAM ...: the rank is PROGRAM (the launcher is its parent).
  if (fs::path(command.front()).filename() == "gpulab-launch") {
    const auto dashes = std::find(command.begin(), command.end(), "--");
    if (dashes != command.end() && dashes + 1 != command.end()) return *(dashes + 1);
  }
  return command.front();
}
}  // namespace

MpiRun run_mpi(int ranks, const fs::path& logs, const std::vector<std::string>& command,
               const ProcessOptions& options) {
  MpiRun run;
  fs::remove_all(logs);
  fs::create_directories(logs);
  ProcessOptions o = options;
  // Marks this run's processes (every rank inherits it, across namespaces too), so that the
  // leftover check and the fault injector touch this run only, not a grade running beside it.
  // The pid, a count and 62 random bits: graders in containers of their own pid namespace may
  // share a pid, and the marker decides what a remote scan kills on a shared node.
  static int runs = 0;
  static std::mt19937_64 random_bits{std::random_device{}()};
  const std::string marker_value = std::to_string(getpid()) + "-" + std::to_string(++runs) + "-" + std::to_string(random_bits() >> 2);
  o.env["GPULAB_MPI_RUN"] = marker_value;
  const std::string marker = "GPULAB_MPI_RUN=" + marker_value;
  std::unique_ptr<FaultInjector> injector;
  if (!faults().empty() && !command.empty()) {
    double last = 0;
    for (const MpiFault& f : faults()) last = std::max(last, f.at_s);
    if (o.timeout_s <= 0 || o.timeout_s > last + 20) o.timeout_s = last + 20;
    injector = std::make_unique<FaultInjector>(faults(), launched_program(command), marker_value, remote_hosts());
  }
  try {
    run.process = run_process(mpirun_argv(ranks, logs, command, mpi_exports(o.env)), o);
  } catch (...) {
    // Interrupted (the grade stopped): the injector first, then nothing of the run left on the
    // other hosts (this host's were killed with mpirun).
    injector.reset();
    (void)remote_leftovers(remote_hosts(), marker_value);
    throw;
  }
  const std::vector<std::string> injected = injector ? injector->finish() : std::vector<std::string>{};
  run.rank_output.resize(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    for (const auto& job : fs::directory_iterator(logs)) {
      const fs::path dir = job.path() / ("rank." + std::to_string(r));
      for (const char* stream : {"stdout", "stderr"}) {
        if (fs::exists(dir / stream)) run.rank_output[static_cast<std::size_t>(r)] += read_text(dir / stream);
      }
    }
  }
  run.problems = launcher_problems(run.process.output);
  run.rank_hosts = parse_display_map(run.process.output);
  if (run.process.timed_out) {
    run.problems.insert(run.problems.begin(), "did not finish within " +
                        std::to_string(static_cast<int>(o.timeout_s)) + " s: every rank was killed");
  }
  // A fault that was injected explains the run's failure; one that was not (the run ended first)
  // is a note: the run is judged on its own.
  std::vector<std::string> fired;
  for (const std::string& e : injected) (e.rfind("fault not injected", 0) == 0 ? run.notes : fired).push_back(e);
  run.problems.insert(run.problems.begin(), fired.begin(), fired.end());
  // run_process kills the whole tree; this confirms that nothing of the program survived.
  if (!command.empty()) {
    for (int pid : processes_running(launched_program(command))) {
      if (!environment_has(pid, marker)) continue;  // another run's
      run.leftovers.push_back(std::to_string(pid));
      kill(pid, SIGKILL);
    }
    // And on the other hosts of a real cluster, over ssh, by the same marker; a host that cannot
    // be asked is a problem of the run (nothing is known of what it left), not a leftover.
    std::vector<std::string> unasked;
    for (const std::string& left : remote_leftovers(remote_hosts(), marker_value, &unasked)) run.leftovers.push_back(left);
    run.problems.insert(run.problems.end(), unasked.begin(), unasked.end());
  }
  return run;
}

int mpirun_command(int ranks, double timeout_s, const std::string& logs, const std::vector<std::string>& command) {
  ProcessOptions options;
  options.timeout_s = timeout_s;
  const MpiRun run = run_mpi(ranks, logs, command, options);
  for (int r = 0; r < ranks; ++r) {
    std::istringstream in(run.rank_output[static_cast<std::size_t>(r)]);
    for (std::string line; std::getline(in, line);) std::cout << "[rank " << r << "] " << line << '\n';
  }
  if (!run.process.output.empty()) std::cout << "[mpirun] " << run.process.output << '\n';
  for (const auto& p : run.problems) std::cout << "gpulab: " << p << '\n';
  if (!run.leftovers.empty()) std::cout << "gpulab: processes left behind were killed\n";
  if (run.process.timed_out) return 124;
  if (run.process.signal != 0) return 128 + run.process.signal;
  if (!run.leftovers.empty() && run.process.exit_code == 0) return 1;
  return run.process.exit_code;
}

}  // namespace gpulab::cli
