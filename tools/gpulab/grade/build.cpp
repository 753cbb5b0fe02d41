/// @file build.cpp
/// @brief cmake --build, and diagnostics extraction.
#include "grade/build.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

namespace gpulab::cli {

int build_jobs() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 2 : static_cast<int>(n);
}

BuildProgress::BuildProgress(std::string what, bool terminal, std::ostream& out) : what_(std::move(what)), terminal_(terminal), out_(out) {}

void BuildProgress::feed(const std::string& chunk) {
  static const std::regex ninja(R"(^\[(\d+)/(\d+)\])"), make(R"(^\[ *(\d+)%\])");
  partial_ += chunk;
  for (std::size_t end = partial_.find('\n'); end != std::string::npos; end = partial_.find('\n')) {
    const std::string line = partial_.substr(0, end);
    partial_.erase(0, end + 1);
    std::smatch m;
    if (std::regex_search(line, m, ninja)) show(std::stol(m[1].str()), std::stol(m[2].str()));
    else if (std::regex_search(line, m, make)) show(std::stol(m[1].str()), 100);
  }
}

void BuildProgress::show(long step, long total) {
  if (total < 10) return;  // a few steps: over before a line would help
  const long percent = 100 * step / total;
  const std::string note = total > 40 ? " (a first build: a few minutes, only once)" : "";
  if (terminal_) {
    out_ << "\r  building " << what_ << ": step " << step << " of " << total << note << "   " << std::flush;
    any_ = true;
  } else if (percent / 25 != shown_percent_ / 25 || shown_percent_ < 0) {
    out_ << "  building " << what_ << ": step " << step << " of " << total << note << '\n' << std::flush;
    shown_percent_ = percent;
  }
}

void BuildProgress::finish() {
  if (terminal_ && any_) out_ << "\r" << std::string(100, ' ') << "\r" << std::flush;
}

namespace {
/// One build at a time in a build tree (two Ninjas in one tree corrupt its logs): selftest's two
/// workers, or a `watch` beside a `grade`, wait here for each other. The lock goes with the
/// process, or with this object.
class BuildLock {
 public:
  explicit BuildLock(const Paths& paths) : fd_(open((paths.build / ".gpulab-build.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ >= 0) {
      while (flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
    }
  }
  ~BuildLock() {
    if (fd_ >= 0) close(fd_);  // releases it
  }
  BuildLock(const BuildLock&) = delete;
  BuildLock& operator=(const BuildLock&) = delete;

 private:
  int fd_;
};
}  // namespace

BuildResult build_targets(const Paths& paths, const std::vector<std::string>& targets, bool echo, const std::string& progress) {
  std::vector<std::string> argv = {"cmake", "--build", paths.build.string(), "-j",
                                   std::to_string(build_jobs())};
  if (!targets.empty()) {
    argv.push_back("--target");
    argv.insert(argv.end(), targets.begin(), targets.end());
  }
  ProcessOptions options;
  options.timeout_s = 3600;
  options.echo = echo;
  options.keep_bytes = 4 << 20;
  BuildProgress shown(progress, isatty(STDOUT_FILENO) != 0, std::cout);
  if (!progress.empty() && !echo) options.on_output = [&shown](const std::string& chunk) { shown.feed(chunk); };
  const ProcessResult r = [&] {
    const BuildLock lock(paths);
    return run_process(argv, options);
  }();
  shown.finish();
  BuildResult b;
  b.ok = r.exited(0);
  b.output = r.output;
  if (!b.ok) b.diagnostics = extract_diagnostics(r.output);
  return b;
}

std::string extract_diagnostics(const std::string& log,
                                const std::vector<std::pair<std::string, std::string>>& rewrite) {
  // Compiler lines: gcc "file:line:col: error: ...", nvcc "file(line): error: ...", their
  // context lines (source excerpt, caret, "In function"), linker "undefined reference".
  static const std::regex located(R"(^.*(\(\d+\)|:\d+(:\d+)?): (error|warning|note|fatal error|catastrophic error)\b.*$)");
  static const std::regex linker(R"(undefined reference to|multiple definition of|ld returned|cannot find -l)");
  static const std::regex summary(R"(^\d+ errors? detected in the compilation of)");
  static const std::regex noise(R"(^(FAILED:|ninja:|\[\d+/\d+\]|\[ *\d+%\]|gmake|make(\[\d+\])?:|-- |CMake |/usr/bin/c\+\+ |/usr/bin/g\+\+ |\S*nvcc |\S*/ld |Error \d+|Call Stack))");
  std::istringstream in(log);
  std::ostringstream out;
  std::string line;
  bool in_message = false;
  int kept = 0;
  while (std::getline(in, line) && kept < 200) {
    if (std::regex_search(line, noise)) {
      in_message = false;
      continue;
    }
    const bool starts = std::regex_match(line, located) || std::regex_search(line, linker) ||
                        std::regex_search(line, summary) || line.find("In function") != std::string::npos ||
                        line.find("In member function") != std::string::npos ||
                        line.find("collect2:") != std::string::npos;
    if (starts) in_message = true;
    if (!in_message) continue;
    // Context lines after a message are indented or a caret line; a flush-left line ends it.
    if (!starts && !line.empty() && line[0] != ' ' && line[0] != '\t' && line[0] != '^') {
      in_message = false;
      continue;
    }
    for (const auto& [from, to] : rewrite) {
      for (std::size_t pos = line.find(from); pos != std::string::npos; pos = line.find(from, pos + to.size())) {
        line.replace(pos, from.size(), to);
      }
    }
    out << line << '\n';
    ++kept;
  }
  std::string text = out.str();
  if (text.empty()) {
    // Nothing recognisable: show the tail of the log rather than nothing.
    text = log.size() > 4000 ? log.substr(log.size() - 4000) : log;
  }
  return text;
}

namespace {
/// What Ninja's dependency log says the objects @p objects (all when empty) read, as absolute
/// paths; nothing when the build is not Ninja's.
std::set<std::string> ninja_deps(const Paths& paths, const std::vector<std::string>& objects) {
  std::set<std::string> files;
  if (!fs::exists(paths.build / "build.ninja")) return files;
  std::vector<std::string> argv = {"ninja", "-C", paths.build.string(), "-t", "deps"};
  for (const std::string& o : objects) argv.push_back(fs::path(o).lexically_normal().lexically_relative(paths.build).string());
  ProcessOptions o;
  o.timeout_s = 60;
  o.keep_bytes = 64u << 20;
  const ProcessResult deps = [&] {
    const BuildLock lock(paths);  // a build beside it would be writing the log read here
    return run_process(argv, o);
  }();
  if (!deps.exited(0)) return files;
  std::istringstream lines(deps.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("    ", 0) != 0) continue;  // "object: #deps N, ..." heads each object's list
    const std::string file = line.substr(line.find_first_not_of(' '));
    files.insert(fs::path(file).is_absolute() ? file : (paths.build / file).lexically_normal().string());
  }
  return files;
}
}  // namespace

std::vector<std::string> object_inputs(const Paths& paths, const std::string& object) {
  const std::set<std::string> files = ninja_deps(paths, {object});
  return {files.begin(), files.end()};
}

std::vector<fs::path> build_inputs(const Paths& paths, const std::vector<fs::path>& except) {
  const fs::path manifest = paths.build / "build.ninja";
  if (!fs::exists(manifest)) return {};
  std::set<std::string> files = ninja_deps(paths, {});
  if (files.empty()) return {};
  // The configuration's inputs: build.ninja is remade when any of them changes.
  std::istringstream rules(read_text(manifest));
  for (std::string line; std::getline(rules, line);) {
    if (line.rfind("build build.ninja", 0) != 0) continue;
    std::istringstream words(line.substr(line.find('|') == std::string::npos ? line.size() : line.find('|') + 1));
    for (std::string word; words >> word;) files.insert(word);
  }
  const std::string root = paths.root.lexically_normal().string() + "/";
  std::vector<std::string> skip = {paths.build.lexically_normal().string() + "/"};
  for (const fs::path& e : except) skip.push_back(e.lexically_normal().string() + "/");
  std::vector<fs::path> inputs;
  for (const std::string& f : files) {
    if (f.rfind(root, 0) != 0) continue;  // the system's headers are not the grade's to guard
    if (std::any_of(skip.begin(), skip.end(), [&](const std::string& s) { return f.rfind(s, 0) == 0; })) continue;
    if (fs::is_regular_file(f)) inputs.emplace_back(f);
  }
  return inputs;
}

}  // namespace gpulab::cli
