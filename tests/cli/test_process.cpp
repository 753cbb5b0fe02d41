/// @file test_process.cpp
/// @brief The grader's subprocess runner: exit codes, signals, time limits, no orphans.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <chrono>
#include <fstream>
#include <thread>

#include "base/process.hpp"

using gpulab::cli::ProcessOptions;
using gpulab::cli::run_process;

TEST_CASE("exit codes and output are captured", "[cpu]") {
  const auto r = run_process({"sh", "-c", "echo out; echo err >&2; exit 3"});
  CHECK(r.exited(3));
  CHECK(r.output.find("out") != std::string::npos);
  CHECK(r.output.find("err") != std::string::npos);
  CHECK(r.describe() == "exit 3");
}

TEST_CASE("a crash is reported as a signal", "[cpu]") {
  const auto r = run_process({"sh", "-c", "kill -SEGV $$"});
  CHECK(r.signal == SIGSEGV);
  CHECK_FALSE(r.exited(0));
  CHECK(r.describe().find("signal") != std::string::npos);
}

TEST_CASE("a hung process and its children are killed at the time limit", "[cpu]") {
  const std::string pid_file = "/tmp/gpulab-test-grandchild.pid";
  std::remove(pid_file.c_str());
  ProcessOptions o;
  o.timeout_s = 1.0;
  const auto t0 = std::chrono::steady_clock::now();
  // The child starts a grandchild that would outlive it, then hangs.
  const auto r = run_process({"sh", "-c", "sleep 300 & echo $! > " + pid_file + "; sleep 300"}, o);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(r.timed_out);
  CHECK(took < 10.0);
  CHECK(r.describe().find("timed out") != std::string::npos);
  std::ifstream in(pid_file);
  int grandchild = 0;
  in >> grandchild;
  REQUIRE(grandchild > 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // Gone: no orphan left running. A killed orphan may linger as a zombie (state Z) until init
  // reaps it; that is a dead process.
  std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
  std::string pid_field, comm, state;
  const bool alive = kill(grandchild, 0) == 0 && (stat >> pid_field >> comm >> state) && state != "Z";
  CHECK_FALSE(alive);
}

TEST_CASE("environment variables reach the child and a missing program is an error", "[cpu]") {
  ProcessOptions o;
  o.env = {{"GPULAB_TEST_VALUE", "hello"}};
  CHECK(run_process({"sh", "-c", "test \"$GPULAB_TEST_VALUE\" = hello"}, o).exited(0));
  CHECK(run_process({"/nonexistent/program"}).exited(127));
}

TEST_CASE("a stop signal kills everything run_process started and leaves nothing behind", "[cpu]") {
  // A child process stands in for the grader: it runs a shell that starts two sleepers (one in
  // the background) and is interrupted while they run.
  const std::string marker = "313.0" + std::to_string(::getpid() % 1000);  // a sleep no one else runs
  auto sleepers = [&] {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
      std::ifstream cmdline(e.path() / "cmdline");
      std::string text((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
      std::string state;
      std::ifstream stat(e.path() / "stat");
      std::getline(stat, state);
      if (text.find(marker) != std::string::npos && text.rfind("sleep", 0) == 0 && state.find(") Z ") == std::string::npos) ++n;
    }
    return n;
  };
  const pid_t grader = fork();
  if (grader == 0) {
    gpulab::cli::install_interrupt_handlers();
    try {
      gpulab::cli::ProcessOptions o;
      o.timeout_s = 60;
      gpulab::cli::run_process({"sh", "-c", "sleep " + marker + " & sleep " + marker + "; wait"}, o);
    } catch (const gpulab::cli::Interrupted&) {
      _exit(130);
    }
    _exit(1);
  }
  for (int k = 0; k < 200 && sleepers() < 2; ++k) ::usleep(20000);
  REQUIRE(sleepers() == 2);
  ::kill(grader, SIGINT);
  int status = 0;
  ::waitpid(grader, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  CHECK(sleepers() == 0);
}


TEST_CASE("a closed output pipe after Ctrl-C stops the grader cleanly with the interrupt as its reason", "[cpu]") {
  // `gpulab grade 08 | tee log` and Ctrl-C: the terminal's SIGINT reaches both, tee dies first, and
  // the grader's next write raises SIGPIPE — which by default killed it silently (exit 141) before
  // it stopped what it had started. The child stands in for the grader, its stdout the pipe.
  for (const bool interrupted : {true, false}) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t grader = fork();
    if (grader == 0) {
      ::close(fds[0]);
      ::dup2(fds[1], STDOUT_FILENO);
      gpulab::cli::install_interrupt_handlers();
      if (interrupted) ::raise(SIGINT);
      ::usleep(100000);  // the reader is gone by now
      const ssize_t wrote = ::write(STDOUT_FILENO, "scorecard line\n", 15);
      try {
        gpulab::cli::ProcessOptions o;
        gpulab::cli::run_process({"true"}, o);  // the next thing the grader does
      } catch (const gpulab::cli::Interrupted& e) {
        _exit(wrote < 0 ? 128 + e.signal : 3);
      }
      _exit(2);
    }
    ::close(fds[1]);
    ::close(fds[0]);  // the reader (tee) has ended
    int status = 0;
    ::waitpid(grader, &status, 0);
    INFO((interrupted ? "Ctrl-C, then the pipe" : "the pipe alone") << ": status " << status);
    CHECK(WIFEXITED(status));  // not killed by SIGPIPE
    CHECK(WEXITSTATUS(status) == (interrupted ? 128 + SIGINT : 128 + SIGPIPE));
  }
}
TEST_CASE("a sandboxed command sees what the sandbox shows and writes only where it may", "[cpu]") {
  if (!gpulab::cli::sandbox_available()) {
    WARN("not checked here: " << gpulab::cli::sandbox_missing());
    return;
  }
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "gpulab-test-sandbox";
  std::filesystem::remove_all(dir);
  for (const char* sub : {"hidden", "hidden/shown", "open", "out"}) std::filesystem::create_directories(dir / sub);
  std::ofstream(dir / "hidden" / "secret") << "secret";
  std::ofstream(dir / "hidden" / "shown" / "file") << "shown";
  std::ofstream(dir / "open" / "file") << "before";
  gpulab::cli::Sandbox box;
  box.keep = {dir.string()};  // under /tmp, which the sandbox replaces with its own
  box.hide = {(dir / "hidden").string()};
  box.show = {(dir / "hidden" / "shown" / "file").string()};
  box.writable = {(dir / "out").string()};
  ProcessOptions o;
  o.sandbox = &box;
  const std::string d = dir.string();
  const auto r = run_process({"sh", "-c", "cat " + d + "/hidden/secret 2>/dev/null && echo SAW-SECRET; cat " + d + "/hidden/shown/file; echo; "
                                          "echo after > " + d + "/open/file 2>/dev/null && echo WROTE-OPEN; echo made > " + d + "/out/file; "
                                          "echo scratch > /tmp/scratch && cat /tmp/scratch; "
                                          "cat /proc/net/dev | grep -c ':' "},
                             o);
  INFO(r.output);
  CHECK(r.exited(0));
  CHECK(r.output.find("SAW-SECRET") == std::string::npos);
  CHECK(r.output.find("shown") != std::string::npos);
  CHECK(r.output.find("WROTE-OPEN") == std::string::npos);
  CHECK(r.output.find("scratch") != std::string::npos);
  CHECK(r.output.find("\n1\n") != std::string::npos);  // one network interface: loopback
  std::ifstream open(dir / "open" / "file"), out(dir / "out" / "file");
  std::string before, made;
  open >> before;
  out >> made;
  CHECK(before == "before");
  CHECK(made == "made");
  CHECK(!std::filesystem::exists("/tmp/scratch"));
  std::filesystem::remove_all(dir);
}
