/// @file process.cpp
/// @brief fork/exec with a process group, a deadline and a kill of the whole group.
#include "base/process.hpp"
#include "base/proc_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>

namespace gpulab::cli {
namespace fs = std::filesystem;
namespace {
using Clock = std::chrono::steady_clock;

/// The signal that asked the grader to stop, 0 if none (set by the handler, read by the loop).
volatile std::sig_atomic_t g_interrupt = 0;

/// The first signal is the reason: Ctrl-C on `gpulab grade | tee log` stops tee too, and the next
/// write then raises SIGPIPE, which must not hide the SIGINT (or kill the grader before it cleans up).
extern "C" void on_interrupt(int signal) {
  if (g_interrupt == 0) g_interrupt = signal;
}
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
}  // namespace

namespace {
/// Kills everything below this process and reaps what were our children. This process is a
/// child subreaper (see run_process), so an orphan whose parent died — an MPI rank whose
/// mpirun was killed, a grandchild that outlived its shell — is still below us and still found.
void kill_all_descendants() {
  for (int round = 0; round < 4; ++round) {
    // Zombies first (a sandbox's processes end just after it, re-parented here): reaped, not
    // waited for; then a short wait that grows while something is still alive.
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    const std::vector<pid_t> left = descendants(getpid());
    if (left.empty()) break;
    for (pid_t pid : left) kill(pid, SIGKILL);
    usleep(1000u << (2 * round));  // 1, 4, 16, 64 ms
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}
}  // namespace

Interrupted::Interrupted(int s)
    : std::runtime_error(s == SIGPIPE ? std::string("stopped: the program reading gpulab's output (a pipe: tee, head, less) has ended")
                                      : std::string("interrupted by ") + strsignal(s)),
      signal(s) {}

void install_interrupt_handlers() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: poll() returns at once
  // SIGPIPE too: by default it kills the grader on its next write to a closed pipe, silently
  // (exit 141) and before it has stopped what it started.
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) sigaction(s, &action, nullptr);
}

void throw_if_interrupted() {
  if (g_interrupt != 0) throw Interrupted(g_interrupt);
}

std::string ProcessResult::describe() const {
  if (failed_to_start) return "could not start";
  if (timed_out) return "timed out after " + std::to_string(static_cast<int>(seconds + 0.5)) + " s";
  if (output_exceeded) return "killed: wrote more output than the limit";
  if (signal != 0) return std::string("killed by signal ") + strsignal(signal);
  return "exit " + std::to_string(exit_code);
}

const std::string& sandbox_missing() {
  static const std::string why = [] {
    ProcessOptions o;
    o.timeout_s = 20;
    const ProcessResult r = run_process({"bwrap", "--version"}, o);
    if (r.failed_to_start || r.exit_code == 127) return std::string("bubblewrap (bwrap) is not installed (apt-get install bubblewrap)");
    Sandbox probe;
    const ProcessResult inside = run_process(sandboxed_argv({"true"}, probe), o);
    if (inside.exited(0)) return std::string();
    std::string out = inside.output;
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return "bwrap cannot make its namespaces here (" + inside.describe() + (out.empty() ? "" : ": " + out) + ")";
  }();
  return why;
}

std::vector<std::string> sandboxed_argv(const std::vector<std::string>& argv, const Sandbox& box) {
  std::vector<std::string> out = {"bwrap", "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts"};
  if (!box.network) out.push_back("--unshare-net");
  out.insert(out.end(), {"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/dev/shm"});
  // A GPU's device nodes (none on a machine without one).
  if (DIR* dev = opendir("/dev")) {
    while (dirent* e = readdir(dev)) {
      if (std::strncmp(e->d_name, "nvidia", 6) == 0) out.insert(out.end(), {"--dev-bind", std::string("/dev/") + e->d_name, std::string("/dev/") + e->d_name});
    }
    closedir(dev);
  }
  for (const std::string& p : box.keep) {
    if (fs::exists(p)) out.insert(out.end(), {"--ro-bind", p, p});
  }
  for (const std::string& p : box.hide) {
    if (fs::is_directory(p)) {
      out.insert(out.end(), {"--tmpfs", p});
    } else if (fs::exists(p)) {
      out.insert(out.end(), {"--ro-bind", "/dev/null", p});
    }
  }
  for (const std::string& p : box.show) {
    if (fs::exists(p)) out.insert(out.end(), {"--ro-bind", p, p});
  }
  for (const std::string& p : box.writable) {
    if (fs::exists(p)) out.insert(out.end(), {"--bind", p, p});
  }
  // The hidden folders stay empty: read-only, once what is shown inside them is in place.
  for (const std::string& p : box.hide) {
    if (fs::is_directory(p)) out.insert(out.end(), {"--remount-ro", p});
  }
  out.insert(out.end(), {"--setenv", "TMPDIR", "/tmp", "--"});
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

namespace {

/// The child's side of run_process: its own process group, output into the pipe, no stdin.
[[noreturn]] void run_child(const std::vector<std::string>& argv, const ProcessOptions& options, const int pipe_fds[2]) {
  setpgid(0, 0);  // so that the whole tree can be killed at once
  dup2(pipe_fds[1], STDOUT_FILENO);
  dup2(pipe_fds[1], STDERR_FILENO);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  const int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, STDIN_FILENO);
  if (!options.cwd.empty() && chdir(options.cwd.c_str()) != 0) _exit(127);
  for (const auto& [key, value] : options.env) setenv(key.c_str(), value.c_str(), 1);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  std::fprintf(stderr, "gpulab: cannot run %s: %s\n", args[0], std::strerror(errno));
  _exit(127);
}

/// Stops the process group of @p pid: asked first (mpirun then stops its ranks itself), then
/// killed after 2 s; reaps @p pid into @p status.
void stop_group(pid_t pid, int& status) {
  kill(-pid, SIGTERM);
  const auto grace = Clock::now();
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (since(grace) > 2.0) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    usleep(20000);
  }
  kill(-pid, SIGKILL);
}

}  // namespace

int start_daemon(const std::vector<std::string>& argv, double timeout_s) {
  if (argv.empty()) return -1;
  prctl(PR_SET_CHILD_SUBREAPER, 0);
  const pid_t pid = fork();
  if (pid == 0) {
    setsid();  // its own session: no signal meant for this process group reaches the daemon
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0, code = -1;
  if (pid > 0) {
    const auto start = Clock::now();
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (since(start) > timeout_s) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        status = -1;
        break;
      }
      usleep(2000);
    }
    code = status == -1 ? 124 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  prctl(PR_SET_CHILD_SUBREAPER, 1);  // as run_process set it
  return code;
}

ProcessResult run_process(const std::vector<std::string>& plain_argv, const ProcessOptions& options) {
  if (g_interrupt != 0) throw Interrupted(g_interrupt);
  const std::vector<std::string> argv = options.sandbox != nullptr ? sandboxed_argv(plain_argv, *options.sandbox) : plain_argv;
  ProcessResult result;
  // Orphans of the command (processes whose parent died) are re-parented to us rather than to
  // init, so kill_all_descendants() can still find them.
  static const bool subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
  (void)subreaper;
  int pipe_fds[2];
  if (argv.empty() || pipe(pipe_fds) != 0) {
    result.failed_to_start = true;
    return result;
  }
  const auto start = Clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    result.failed_to_start = true;
    return result;
  }
  if (pid == 0) run_child(argv, options, pipe_fds);
  setpgid(pid, pid);  // also from the parent, to win the race with the kill below
  close(pipe_fds[1]);
  fcntl(pipe_fds[0], F_SETFL, fcntl(pipe_fds[0], F_GETFL) | O_NONBLOCK);

  int status = 0;
  bool reaped = false, pipe_open = true;
  std::size_t written = 0;  // every byte of output, also those no longer kept
  char buffer[65536];
  auto drain = [&] {
    while (pipe_open) {
      const ssize_t got = read(pipe_fds[0], buffer, sizeof buffer);
      if (got > 0) {
        result.output.append(buffer, static_cast<std::size_t>(got));
        written += static_cast<std::size_t>(got);
        if (options.echo) std::cout.write(buffer, got).flush();
        if (options.on_output) options.on_output(std::string(buffer, static_cast<std::size_t>(got)));
        if (result.output.size() > 2 * options.keep_bytes) {
          result.output.erase(0, result.output.size() - options.keep_bytes);
        }
        if (options.max_output_bytes > 0 && written > options.max_output_bytes) break;  // a flood: stopped below
      } else if (got == 0) {
        pipe_open = false;
      } else {
        break;  // EAGAIN: nothing more for now
      }
    }
  };
  while (!reaped || pipe_open) {
    pollfd pfd{pipe_fds[0], POLLIN, 0};
    if (pipe_open) poll(&pfd, 1, 20);
    drain();
    if (!reaped && waitpid(pid, &status, WNOHANG) == pid) {
      reaped = true;
      // The child is gone; anything it left behind in its group goes too, so that the pipe
      // closes and no orphan keeps running.
      kill(-pid, SIGKILL);
    }
    if (!reaped && g_interrupt != 0) {
      // Told to stop: the command's group first, then anything of it that left the group (an
      // MPI rank in a group of its own), all reaped before we go.
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      close(pipe_fds[0]);
      kill_all_descendants();
      throw Interrupted(g_interrupt);
    }
    if (!reaped && options.max_output_bytes > 0 && written > options.max_output_bytes) {
      result.output_exceeded = true;
      stop_group(pid, status);
      reaped = true;
    }
    if (!reaped && options.timeout_s > 0 && since(start) > options.timeout_s) {
      result.timed_out = true;
      stop_group(pid, status);
      reaped = true;
    }
    if (reaped && pipe_open && !pfd.revents) {
      // Grandchildren were killed above; give the pipe one last drain.
      drain();
      pipe_open = false;
    }
  }
  close(pipe_fds[0]);
  kill_all_descendants();
  result.seconds = since(start);
  if (!result.timed_out && !result.output_exceeded) {
    if (WIFEXITED(status)) {
      result.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      result.signal = WTERMSIG(status);
    }
  }
  if (result.output.size() > options.keep_bytes) {
    result.output.erase(0, result.output.size() - options.keep_bytes);
  }
  return result;
}

}  // namespace gpulab::cli
