/// @file process.hpp
/// @brief Running a command in its own process group with a time limit, output captured to a
/// file, every process of the group killed at the end (no orphans). POSIX only.
#pragma once

#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpulab::cli {

struct ProcessResult {
  int exit_code = -1;       ///< the exit status when the process exited
  int signal = 0;           ///< the signal that killed it, 0 if it exited
  bool timed_out = false;   ///< killed by us at the time limit
  bool output_exceeded = false;  ///< stopped by us: it wrote more than max_output_bytes
  bool failed_to_start = false;
  double seconds = 0.0;     ///< wall time
  std::string output;       ///< stdout and stderr together (the last `keep_bytes` of them)

  bool exited(int code) const { return !timed_out && signal == 0 && exit_code == code; }
  /// "exit 1", "killed by SIGSEGV", "timed out after 60 s", ...
  std::string describe() const;
};

/// What a sandboxed command sees (bubblewrap): the whole file system read-only, a private /tmp and
/// /dev/shm, its own process tree (pid namespace) and, unless @p network, a network of its own
/// with only loopback; then, in this order, @p keep bound back (a tree under /tmp), @p hide made
/// empty and read-only (folders) or /dev/null (files), @p show bound read-only again (a file inside a hidden
/// folder), @p writable bound read-write.
struct Sandbox {
  std::vector<std::string> keep, hide, show, writable;
  bool network = false;
};

struct ProcessOptions {
  double timeout_s = 60.0;                      ///< ≤ 0: no limit
  std::map<std::string, std::string> env;       ///< added to (and overriding) the environment
  std::string cwd;                              ///< "" = the current directory
  bool echo = false;                            ///< also copy the output to our stdout, live
  std::function<void(const std::string&)> on_output;  ///< called with each piece of output as it comes
  const Sandbox* sandbox = nullptr;             ///< run inside it (see sandbox_missing); nullptr: as it is
  std::size_t keep_bytes = 1 << 20;
  std::size_t max_output_bytes = 0;             ///< > 0: stop the command once it has written more (output_exceeded)
};

/// Runs argv[0] (searched in PATH) with arguments argv[1..]. Throws Interrupted when this process
/// received SIGINT, SIGTERM or SIGHUP (after install_interrupt_handlers) while it ran: the
/// command and everything below it were killed and reaped first.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

/// Runs @p argv, a command that starts a daemon and returns (`sshd` forks one once it listens),
/// so that the daemon outlives this call and this process: run_process kills every process below
/// this one (it is a child subreaper), so here that is switched off until the command has
/// returned and its daemon has gone to init. Returns the command's exit code (-1 if it could not
/// start, 124 after @p timeout_s). The daemon is its starter's to stop (`cluster down` kills
/// every process in its namespaces).
int start_daemon(const std::vector<std::string>& argv, double timeout_s = 10);

/// Why commands cannot be sandboxed here ("" when they can): bubblewrap (bwrap) missing, or
/// unable to make its namespaces (no user namespaces and not root).
const std::string& sandbox_missing();
inline bool sandbox_available() { return sandbox_missing().empty(); }

/// @p argv inside @p box: the bwrap command line.
std::vector<std::string> sandboxed_argv(const std::vector<std::string>& argv, const Sandbox& box);

/// The grader was told to stop (Ctrl-C, a kill, a closed terminal).
struct Interrupted : std::runtime_error {
  explicit Interrupted(int signal);
  int signal;
};

/// Makes SIGINT, SIGTERM and SIGHUP stop the grader cleanly: every process group it started is
/// killed, reaped, and run_process throws Interrupted (main turns it into exit 130). The
/// commands run in process groups of their own, so a terminal's Ctrl-C reaches only the grader,
/// which forwards it: nothing it started is left running under init.
void install_interrupt_handlers();
/// Throws Interrupted when a stop signal has arrived (for loops that wait outside run_process).
void throw_if_interrupted();

}  // namespace gpulab::cli
