/// @file process.cpp
/// @brief fork/exec with a process group, a deadline and a kill of the whole group.
#include "process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <iostream>

namespace gpulab::cli {
namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
}  // namespace

std::string ProcessResult::describe() const {
  if (failed_to_start) return "could not start";
  if (timed_out) return "timed out after " + std::to_string(static_cast<int>(seconds + 0.5)) + " s";
  if (signal != 0) return std::string("killed by signal ") + strsignal(signal);
  return "exit " + std::to_string(exit_code);
}

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  ProcessResult result;
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
  if (pid == 0) {
    // Child: own process group, so that the whole tree can be killed at once.
    setpgid(0, 0);
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
  setpgid(pid, pid);  // also from the parent, to win the race with the kill below
  close(pipe_fds[1]);
  fcntl(pipe_fds[0], F_SETFL, fcntl(pipe_fds[0], F_GETFL) | O_NONBLOCK);

  int status = 0;
  bool reaped = false, pipe_open = true;
  char buffer[65536];
  auto drain = [&] {
    while (pipe_open) {
      const ssize_t got = read(pipe_fds[0], buffer, sizeof buffer);
      if (got > 0) {
        result.output.append(buffer, static_cast<std::size_t>(got));
        if (options.echo) std::cout.write(buffer, got).flush();
        if (result.output.size() > 2 * options.keep_bytes) {
          result.output.erase(0, result.output.size() - options.keep_bytes);
        }
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
    if (!reaped && options.timeout_s > 0 && since(start) > options.timeout_s) {
      result.timed_out = true;
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
      reaped = true;
    }
    if (reaped && pipe_open && !pfd.revents) {
      // Grandchildren were killed above; give the pipe one last drain.
      drain();
      pipe_open = false;
    }
  }
  close(pipe_fds[0]);
  result.seconds = since(start);
  if (!result.timed_out) {
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
