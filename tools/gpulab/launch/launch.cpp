/// @file launch.cpp
/// @brief gpulab-launch: the trusted parent of one process under test (see README.md).
///
///     gpulab-launch [--no-seccomp] [--cpu-seconds S] [--max-processes N] [--max-memory-mb M]
///                   [--loopback-only] [--outputs DIR] -- PROGRAM ARGS...
///     gpulab-launch --features      (prints "seccomp", or "no-seccomp: why")
///
/// Runs PROGRAM with its records on descriptor 3 (GPULAB_REPORT_FD=3), under a seccomp filter
/// where it was built with libseccomp, and when it has ended (and everything it left running is
/// killed) writes one frame line to standard output and exits as PROGRAM did (the same code, or
/// the same signal), so that mpirun and the grader see the program's own ending. The values the
/// program's checks compared (`@blob` blocks among its records) go to a file in DIR, each listed in
/// the frame with its place and hash; without --outputs they are hashed and dropped.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/proc_tree.hpp"
#include "launch/frame.hpp"

#ifdef GPULAB_HAVE_SECCOMP
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#ifndef SECCOMP_USER_NOTIF_FLAG_CONTINUE
#define SECCOMP_USER_NOTIF_FLAG_CONTINUE (1UL << 0)
#endif
#endif

namespace {

constexpr int kRecordsFd = 3;                     ///< where the test program's runner writes its records
constexpr std::size_t kMaxRecords = 64u << 20;    ///< bytes of records kept; more is cut and said so
constexpr std::uint64_t kMaxOutputs = 8ull << 30;  ///< bytes of checked values kept; more is cut and said so

struct Options {
  bool seccomp = true;
  long cpu_seconds = 0;     ///< 0: no CPU-time limit
  long max_processes = 64;  ///< processes below the program at once (threads do not count); 0: no limit. Needs the filter
  long max_memory_mb = 0;   ///< resident memory of the program and what it started, summed; 0: no limit
  bool loopback_only = false;  ///< refuse (and report) a connect() to anything but loopback or a Unix socket. Needs the filter
  std::string outputs;   ///< the folder for the checked values ("": hashed, not kept)
  std::vector<char*> program;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "gpulab-launch: %s\nusage: gpulab-launch [--no-seccomp] [--cpu-seconds S] [--max-processes N] [--max-memory-mb M] [--loopback-only] "
               "[--outputs DIR] -- "
               "PROGRAM ARGS...\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  if (argc == 2 && std::strcmp(argv[1], "--features") == 0) {
    // What the grader asks before it grades: whether execve can be refused here.
#ifdef GPULAB_HAVE_SECCOMP
    std::puts("seccomp");
#else
    std::puts("no-seccomp: gpulab-launch was built without libseccomp (apt-get install libseccomp-dev, then rebuild)");
#endif
    std::exit(0);
  }
  int i = 1;
  for (; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    if (std::strcmp(argv[i], "--no-seccomp") == 0) {
      o.seccomp = false;
    } else if (std::strcmp(argv[i], "--cpu-seconds") == 0 && i + 1 < argc) {
      o.cpu_seconds = std::atol(argv[++i]);
    } else if (std::strcmp(argv[i], "--max-processes") == 0 && i + 1 < argc) {
      o.max_processes = std::atol(argv[++i]);
    } else if (std::strcmp(argv[i], "--max-memory-mb") == 0 && i + 1 < argc) {
      o.max_memory_mb = std::atol(argv[++i]);
    } else if (std::strcmp(argv[i], "--loopback-only") == 0) {
      o.loopback_only = true;
    } else if (std::strcmp(argv[i], "--outputs") == 0 && i + 1 < argc) {
      o.outputs = argv[++i];
    } else {
      usage("unknown option");
    }
  }
  if (i + 1 >= argc) usage("no program");
  o.program.assign(argv + i + 1, argv + argc);
  o.program.push_back(nullptr);
  return o;
}

/// PROGRAM as a path: the child runs it with one execve (every later one is refused).
std::string resolve(const char* program) {
  if (std::strchr(program, '/') != nullptr) return program;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  for (std::size_t start = 0; start <= dirs.size();) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string file = (end > start ? dirs.substr(start, end - start) : std::string(".")) + "/" + program;
    if (access(file.c_str(), X_OK) == 0) return file;
    start = end + 1;
  }
  return program;
}

bool write_all(int fd, const std::string& text) {
  for (std::size_t at = 0; at < text.size();) {
    const ssize_t n = write(fd, text.data() + at, text.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += static_cast<std::size_t>(n);
  }
  return true;
}

/// The program's records as they arrive: JSON lines, among which a line `@blob <n>` is followed by
/// n bytes of checked values (gpulab::report::output). The lines are kept for the frame; the
/// values go to the outputs file, each block listed with the number of record lines before it
/// (the record it belongs to is the one just before), its offset, size and hash.
class RecordStream {
 public:
  explicit RecordStream(int outputs_fd) : out_fd_(outputs_fd) {}

  void feed(const char* data, std::size_t n) {
    if (cut_) return;  // after a cut nothing is read as records or values: where the next line starts is unknown
    while (n > 0) {
      if (blob_left_ > 0) {
        const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(n, blob_left_));
        take_blob(data, k);
        data += k;
        n -= k;
        continue;
      }
      const char* newline = static_cast<const char*>(std::memchr(data, '\n', n));
      const std::size_t k = newline != nullptr ? static_cast<std::size_t>(newline - data) + 1 : n;
      if (text_.size() + k > kMaxRecords) {
        cut_ = true;
        return;  // nothing more is read as records or values
      }
      text_.append(data, k);
      data += k;
      n -= k;
      if (newline != nullptr) end_line();
    }
  }

  const std::string& text() const { return text_; }
  bool cut() const { return cut_; }
  nlohmann::json blobs() const {
    nlohmann::json all = blobs_;
    if (blob_left_ > 0 && !all.empty()) all.back()["short_by"] = blob_left_;  // the program ended mid-block
    return all;
  }
  bool outputs_cut() const { return outputs_cut_; }

 private:
  void end_line() {
    static constexpr char kBlob[] = "@blob ";
    const std::string_view line(text_.data() + line_start_, text_.size() - line_start_);
    if (line.rfind(kBlob, 0) == 0) {
      const unsigned long long size = std::strtoull(text_.c_str() + line_start_ + sizeof kBlob - 1, nullptr, 10);
      text_.resize(line_start_);
      blobs_.push_back({{"record", lines_}, {"offset", written_}, {"bytes", size}});
      hash_ = gpulab::kFnvOffsetBasis;
      blob_left_ = size;
      if (size == 0) finish_blob();
      return;
    }
    if (line != "\n") ++lines_;  // the grader skips empty lines: count as it does
    line_start_ = text_.size();
  }

  void take_blob(const char* data, std::size_t k) {
    hash_ = gpulab::fnv1a64(std::string_view(data, k), hash_);
    if (out_fd_ >= 0 && written_ + k <= kMaxOutputs) {
      for (std::size_t at = 0; at < k;) {
        const ssize_t w = write(out_fd_, data + at, k - at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
          outputs_cut_ = true;
          break;
        }
        at += static_cast<std::size_t>(w);
      }
    } else if (out_fd_ >= 0) {
      outputs_cut_ = true;
    }
    written_ += k;
    blob_left_ -= k;
    if (blob_left_ == 0) finish_blob();
  }

  void finish_blob() {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash_));
    blobs_.back()["hash"] = hex;
  }

  int out_fd_;
  std::string text_;
  bool cut_ = false, outputs_cut_ = false;
  std::size_t line_start_ = 0, lines_ = 0;
  std::uint64_t blob_left_ = 0, written_ = 0, hash_ = gpulab::kFnvOffsetBasis;
  nlohmann::json blobs_ = nlohmann::json::array();
};

/// Sends @p fd (or none, with @p note) over the socket @p sock.
void send_fd(int sock, int fd, const std::string& note) {
  char data[256] = {};
  std::snprintf(data, sizeof data, "%s", note.c_str());
  iovec iov{data, sizeof data};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  while (sendmsg(sock, &msg, 0) < 0 && errno == EINTR) {
  }
}

/// The descriptor sent by send_fd, or -1 with its note in @p note.
int receive_fd(int sock, std::string& note) {
  char data[256] = {};
  iovec iov{data, sizeof data};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  while ((n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (n <= 0) {
    note = "the child ended before its seccomp filter was in place";
    return -1;
  }
  note.assign(data, strnlen(data, sizeof data));
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
      return fd;
    }
  }
  return -1;
}

#ifdef GPULAB_HAVE_SECCOMP
/// Loads @p ctx's program with seccomp(2) itself, with a listener whose received calls wait
/// killably (SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV): the listener's descriptor, or -1 when this
/// kernel or libseccomp cannot (then seccomp_load, as before).
int load_waiting_killably(scmp_filter_ctx ctx) {
#if defined(SYS_seccomp) && defined(SYS_memfd_create)
  constexpr unsigned long kNewListener = 1UL << 3;      // SECCOMP_FILTER_FLAG_NEW_LISTENER
  constexpr unsigned long kWaitKillableRecv = 1UL << 5;  // SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (5.19)
  const int mem = static_cast<int>(syscall(SYS_memfd_create, "gpulab-filter", 0));
  if (mem < 0) return -1;
  std::vector<sock_filter> program;
  if (seccomp_export_bpf(ctx, mem) == 0) {
    const off_t size = lseek(mem, 0, SEEK_END);
    if (size > 0 && size % static_cast<off_t>(sizeof(sock_filter)) == 0) {
      program.resize(static_cast<std::size_t>(size) / sizeof(sock_filter));
      if (pread(mem, program.data(), static_cast<std::size_t>(size), 0) != size) program.clear();
    }
  }
  close(mem);
  if (program.empty() || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  sock_fprog prog{static_cast<unsigned short>(program.size()), program.data()};
  return static_cast<int>(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, kNewListener | kWaitKillableRecv, &prog));
#else
  (void)ctx;
  return -1;
#endif
}

/// The filter (see README.md): the listener's descriptor, or -1 and why in @p why.
int install_filter(const Options& o, std::string& why) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) {
    why = "seccomp_init failed";
    return -1;
  }
  // What a lab's tests never need, and what would let a process reach into another or out of
  // the sandbox.
  static const char* const refused[] = {
      // process_vm_readv stays: OpenMPI's shared-memory transport reads another rank's buffer with
      // it (CMA single copy); writing into another process is refused.
      "ptrace", "process_vm_writev", "pidfd_getfd", "kcmp", "process_madvise",
      "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "fsopen", "fsmount", "move_mount", "open_tree",
      "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff",
      "bpf", "keyctl", "add_key", "request_key", "open_by_handle_at", "name_to_handle_at", "perf_event_open",
  };
  for (const char* name : refused) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr != __NR_SCMP_ERROR) seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
  }
  seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(execve), 0);
  seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(execveat), 0);
  if (o.max_processes > 0) {
    // A new process (not a thread) comes to the launcher, which counts it: fork, vfork, and clone
    // without CLONE_THREAD (what fork(), posix_spawn and system() make). clone3 passes its flags
    // in memory, which a filter cannot read: it is answered ENOSYS, and glibc then uses clone.
    seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(fork), 0);
    seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(vfork), 0);
    seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  }
  // In a sandbox without a network (only loopback), a connection elsewhere cannot succeed: the
  // filter makes the attempt seen, so that it is reported.
  if (o.loopback_only) seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(connect), 0);
  // Loaded by hand where the kernel can (Linux 5.19 on), to add WAIT_KILLABLE_RECV: once the
  // launcher has received a call, no signal can interrupt it. Without it a fork the launcher had
  // already counted could be interrupted by a sibling's SIGCHLD and come again (counted twice:
  // six background jobs of one shell counted 9 to 11), or fail ("sh: Cannot fork").
  const int direct = load_waiting_killably(ctx);
  if (direct >= 0) return direct;
  const int rc = seccomp_load(ctx);
  if (rc != 0) {
    why = std::string("seccomp_load failed: ") + std::strerror(-rc);
    seccomp_release(ctx);
    return -1;
  }
  const int fd = seccomp_notify_fd(ctx);
  if (fd < 0) why = "the kernel gave no seccomp listener";
  return fd;  // ctx stays: the child execs next
}
#endif

/// The child's side: records on descriptor 3, limits, the filter, then PROGRAM.
[[noreturn]] void run_child(const Options& o, const std::string& program, int records_write, int sock) {
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) signal(sig, SIG_DFL);
  if (records_write != kRecordsFd) {
    dup2(records_write, kRecordsFd);
    close(records_write);
  }
  fcntl(kRecordsFd, F_SETFD, 0);
  setenv("GPULAB_REPORT_FD", std::to_string(kRecordsFd).c_str(), 1);
  unsetenv("GPULAB_REPORT");
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  const rlimit file_size{rlim_t{4} << 30, rlim_t{4} << 30};  // the scratch folder is memory
  setrlimit(RLIMIT_FSIZE, &file_size);
  if (o.cpu_seconds > 0) {
    const rlimit cpu{static_cast<rlim_t>(o.cpu_seconds), static_cast<rlim_t>(o.cpu_seconds + 5)};
    setrlimit(RLIMIT_CPU, &cpu);
  }
  if (sock >= 0) {
    std::string why = "built without libseccomp";
    int listener = -1;
#ifdef GPULAB_HAVE_SECCOMP
    listener = install_filter(o, why);
#endif
    send_fd(sock, listener, listener >= 0 ? "" : why);
    if (listener >= 0) close(listener);
    close(sock);
  }
  // Nothing of the launcher's beyond 0-3 reaches the program.
  for (int fd = kRecordsFd + 1; fd < 1024; ++fd) close(fd);
  execv(program.c_str(), o.program.data());
  std::fprintf(stderr, "gpulab-launch: cannot run %s: %s\n", program.c_str(), std::strerror(errno));
  _exit(127);
}

/// Kills what the program left running; returns how many there were.
/// Resident memory of @p pid in MiB (0 when it is gone).
long resident_mb(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/statm", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return 0;
  long size = 0, resident = 0;
  const int got = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  static const long page = sysconf(_SC_PAGESIZE);
  return got == 2 ? resident * page / (1 << 20) : 0;
}

/// Kills the program and everything it started, now (a limit was passed).
void kill_tree(pid_t child) {
  kill(child, SIGKILL);
  for (pid_t pid : gpulab::cli::descendants(getpid())) kill(pid, SIGKILL);
}

int kill_leftovers() {
  int count = 0;
  for (int round = 0; round < 5; ++round) {
    const std::vector<pid_t> left = gpulab::cli::descendants(getpid());
    if (left.empty()) break;
    if (round == 0) count = static_cast<int>(left.size());
    for (pid_t pid : left) kill(pid, SIGKILL);
    usleep(10000);
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }
  return count;
}

#ifdef GPULAB_HAVE_SECCOMP
/// A path the refused call named, read from the caller's memory (for the report only).
std::string read_string(pid_t pid, std::uint64_t address) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/mem", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "?";
  char text[256] = {};
  const ssize_t n = pread(fd, text, sizeof text - 1, static_cast<off_t>(address));
  close(fd);
  return n > 0 ? std::string(text, strnlen(text, static_cast<std::size_t>(n))) : std::string("?");
}
#endif

volatile pid_t g_child = 0;

#ifdef GPULAB_HAVE_SECCOMP
/// Where a connect() goes, read from the caller's memory: "" for loopback or a Unix socket (let
/// through), else the address as text ("93.184.216.34:80", "[2606:2800::1]:443", "family 17").
std::string outside_address(pid_t pid, std::uint64_t address, std::uint64_t length) {
  sockaddr_storage a{};
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/mem", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "an address the launcher could not read";
  const ssize_t n = pread(fd, &a, std::min<std::uint64_t>(length, sizeof a), static_cast<off_t>(address));
  close(fd);
  if (n < static_cast<ssize_t>(sizeof(sa_family_t))) return "an address the launcher could not read";
  char text[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_UNIX) return "";
  if (a.ss_family == AF_INET && n >= static_cast<ssize_t>(sizeof(sockaddr_in))) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    if ((ntohl(in->sin_addr.s_addr) >> 24) == 127) return "";
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    return std::string(text) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (a.ss_family == AF_INET6 && n >= static_cast<ssize_t>(sizeof(sockaddr_in6))) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a);
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return "";
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127) return "";
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    return "[" + std::string(text) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "family " + std::to_string(a.ss_family);
}
#endif

/// SIGTERM, SIGINT, SIGHUP (mpirun stopping its ranks, the grader's time limit): passed on to the
/// program, whose ending the launcher then reports as usual.
volatile sig_atomic_t g_pending = 0;
extern "C" void pass_on(int sig) {
  if (g_child > 0) {
    kill(g_child, sig);
  } else {
    g_pending = sig;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Stop signals are passed on to the program from the start (before it exists, they are kept
  // and passed on once it does), so that the launcher always lives to report.
  struct sigaction forward {};
  forward.sa_handler = pass_on;
  sigemptyset(&forward.sa_mask);
  forward.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &forward, nullptr);
  const Options o = parse(argc, argv);
  const std::string program = resolve(o.program[0]);
  signal(SIGPIPE, SIG_IGN);
  // Orphans of the program are re-parented here, so that none outlives the frame; and this
  // process's memory cannot be read or written through /proc by what it runs.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  prctl(PR_SET_DUMPABLE, 0);

  // The checked values' file, made before the program starts (so that nothing it runs can have
  // put one there first): DIR/rank<r>.bin under mpirun, DIR/outputs.bin otherwise.
  int outputs_fd = -1;
  std::string outputs_file;
  if (!o.outputs.empty()) {
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    outputs_file = o.outputs + "/" + (rank != nullptr ? std::string("rank") + rank : std::string("outputs")) + ".bin";
    outputs_fd = open(outputs_file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  }
  RecordStream stream(outputs_fd);

  int records[2];
  int sockets[2] = {-1, -1};
  if (pipe2(records, O_CLOEXEC) != 0) usage("no pipe");
  if (o.seccomp && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) usage("no socket pair");
  const pid_t child = fork();
  if (child < 0) usage("cannot fork");
  if (child == 0) {
    close(records[0]);
    if (sockets[0] >= 0) close(sockets[0]);
    run_child(o, program, records[1], sockets[1]);
  }
  close(records[1]);
  g_child = child;
  if (g_pending != 0) kill(child, g_pending);
  bool filtered = false;
  std::string seccomp_note = o.seccomp ? "" : "--no-seccomp";
  int listener = -1;
  if (o.seccomp) {
    close(sockets[1]);
    listener = receive_fd(sockets[0], seccomp_note);
    close(sockets[0]);
    filtered = listener >= 0;
  }

  nlohmann::json refused = nlohmann::json::array();
  int status = 0;
  bool ended = false;
  std::string limit;       // a limit the launcher enforced by killing the program ("" when none)
  long peak_processes = 0;  // the most processes below the program at once, a fork included (under the filter)
  long peak_mb = 0;        // the most resident memory seen, summed over the program's processes
  auto memory_checked = std::chrono::steady_clock::now();
  auto tree_checked = memory_checked;
  long tree_mb = 0;        // the program's descendants' share, read less often (a /proc walk)
  const auto drain = [&](int fd) {
    char buffer[65536];
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n > 0) stream.feed(buffer, static_cast<std::size_t>(n));
    return n;
  };
#ifdef GPULAB_HAVE_SECCOMP
  bool exec_done = false;
  seccomp_notif* request = nullptr;
  seccomp_notif_resp* response = nullptr;
  if (filtered) seccomp_notify_alloc(&request, &response);
#endif
  bool records_open = true;
  // A descriptor that becomes readable when the program exits (Linux 5.3 on), so that its end is
  // seen at once; without one, the loop looks every 50 ms.
#ifdef SYS_pidfd_open
  const int exited = static_cast<int>(syscall(SYS_pidfd_open, child, 0));
#else
  const int exited = -1;
#endif
  while (!ended) {
    pollfd fds[3] = {{records_open ? records[0] : -1, POLLIN, 0}, {listener, POLLIN, 0}, {exited, POLLIN, 0}};
    const int ready = poll(fds, 3, o.max_memory_mb > 0 ? 10 : 50);
    if (ready > 0 && (fds[0].revents & (POLLIN | POLLHUP)) != 0) {
      if (drain(records[0]) == 0) records_open = false;
    }
#ifdef GPULAB_HAVE_SECCOMP
    if (ready > 0 && listener >= 0 && (fds[1].revents & POLLIN) != 0) {
      std::memset(request, 0, sizeof *request);
      if (seccomp_notify_receive(listener, request) == 0) {
        std::memset(response, 0, sizeof *response);
        response->id = request->id;
        const int nr = request->data.nr;
        bool responded = false;
        if (nr == SCMP_SYS(connect)) {
          const std::string where = outside_address(static_cast<pid_t>(request->pid), request->data.args[1], request->data.args[2]);
          if (where.empty()) {
            response->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
          } else {
            refused.push_back({{"call", "connect"}, {"path", where}});
            response->error = -ENETUNREACH;
          }
        } else if (nr == SCMP_SYS(fork) || nr == SCMP_SYS(vfork) || nr == SCMP_SYS(clone)) {
          // What counts is the processes alive at once, not calls: a fork that finds a signal
          // pending after the launcher let it through is restarted by the kernel
          // (ERESTARTNOINTR) and comes here again, so counting calls made six background jobs of
          // one shell count 9 to 11 and fail as a fork bomb. The walk of /proc is done while the
          // caller waits killably (load_waiting_killably), where no signal can interrupt it.
          const long alive = static_cast<long>(gpulab::cli::descendants(child).size()) + 1;  // with the one asked for
          peak_processes = std::max(peak_processes, alive);
          const bool within = alive <= o.max_processes;
          if (within) {
            response->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
          } else {
            response->error = -EAGAIN;
          }
          if (seccomp_notify_respond(listener, response) == 0 && !within && limit.empty()) {
            limit = "had more than " + std::to_string(o.max_processes) + " processes at once (a fork bomb?)";
            kill_tree(child);
          }
          responded = true;
        } else if (!exec_done && request->pid == static_cast<__u32>(child)) {
          exec_done = true;  // the test program itself
          response->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        } else {
          const bool at = request->data.nr == SCMP_SYS(execveat);
          refused.push_back({{"call", at ? "execveat" : "execve"}, {"path", read_string(static_cast<pid_t>(request->pid), request->data.args[at ? 1 : 0])}});
          response->error = -EPERM;
        }
        if (!responded) seccomp_notify_respond(listener, response);
      }
    }
    if (listener >= 0 && (fds[1].revents & (POLLHUP | POLLERR)) != 0) {
      close(listener);
      listener = -1;
    }
#endif
    if (o.max_memory_mb > 0 && limit.empty()) {
      // Resident memory, the program every 10 ms, its descendants (a walk of /proc) every 200 ms.
      const auto now = std::chrono::steady_clock::now();
      if (now - memory_checked >= std::chrono::milliseconds(10)) {
        memory_checked = now;
        if (now - tree_checked >= std::chrono::milliseconds(200)) {
          tree_checked = now;
          tree_mb = 0;
          for (pid_t pid : gpulab::cli::descendants(child)) tree_mb += resident_mb(pid);
        }
        const long mb = resident_mb(child) + tree_mb;
        peak_mb = std::max(peak_mb, mb);
        if (mb > o.max_memory_mb) {
          limit = "used more than " + std::to_string(o.max_memory_mb) + " MiB of memory (" + std::to_string(mb) + " MiB resident)";
          kill_tree(child);
        }
      }
    }
    const pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) ended = true;
  }
  if (exited >= 0) close(exited);
  const int leftovers = kill_leftovers();
  // Every writer of the records is gone: what is left in the pipe is all there is.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (records_open && std::chrono::steady_clock::now() < deadline) {
    pollfd fd{records[0], POLLIN, 0};
    if (poll(&fd, 1, 100) > 0 && drain(records[0]) <= 0) records_open = false;
  }
#ifdef GPULAB_HAVE_SECCOMP
  if (request != nullptr) seccomp_notify_free(request, response);
#endif

  nlohmann::json frame = {{"version", 1}, {"program", program}, {"records", stream.text()}, {"records_cut", stream.cut()},
                          {"refused", refused}, {"leftovers", leftovers}, {"seccomp", filtered}, {"blobs", stream.blobs()}};
  if (!o.outputs.empty()) frame["outputs"] = outputs_fd >= 0 ? nlohmann::json(outputs_file) : nlohmann::json(nullptr);
  if (struct stat st {}; outputs_fd >= 0 && fstat(outputs_fd, &st) == 0) {
    // The file this launcher wrote, by identity: a file put in its place later is not it.
    frame["outputs_id"] = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  }
  if (stream.outputs_cut()) frame["outputs_cut"] = true;
  if (outputs_fd >= 0) close(outputs_fd);
  if (!filtered) frame["seccomp_note"] = seccomp_note;
  if (const char* rank = std::getenv("OMPI_COMM_WORLD_RANK")) frame["rank"] = std::atoi(rank);
  if (WIFEXITED(status)) frame["exit"] = WEXITSTATUS(status);
  if (o.max_memory_mb > 0) frame["peak_memory_mb"] = peak_mb;
  if (o.max_processes > 0 && filtered) frame["peak_processes"] = peak_processes;
  if (WIFSIGNALED(status)) {
    frame["signal"] = WTERMSIG(status);
    if (!limit.empty()) frame["limit"] = limit;
    if (WTERMSIG(status) == SIGXCPU) frame["limit"] = "used more than " + std::to_string(o.cpu_seconds) + " s of CPU time";
    if (WTERMSIG(status) == SIGXFSZ) frame["limit"] = "wrote a file larger than 4 GiB";
    if (WTERMSIG(status) == SIGSYS) frame["limit"] = "made a system call of another architecture (int $0x80), which the filter refuses";
  }
  const std::string body = frame.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  char head[80];
  std::snprintf(head, sizeof head, "\n%s%zu %016llx ", gpulab::launch::kFrameMarker, body.size(),
                static_cast<unsigned long long>(gpulab::launch::frame_checksum(body)));
  write_all(STDOUT_FILENO, head + body + "\n");

  if (WIFSIGNALED(status)) {
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    signal(WTERMSIG(status), SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, WTERMSIG(status));
    sigprocmask(SIG_UNBLOCK, &set, nullptr);
    raise(WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  // Under mpirun, a rank that exits non-zero makes mpirun abort the job and kill the other ranks,
  // whose reports are then lost on their way. The exit code is in the report, so the launcher of
  // a rank ends with 0 and the grader takes the codes from the reports; a signal stays a signal.
  if (std::getenv("OMPI_COMM_WORLD_RANK") != nullptr) return 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
