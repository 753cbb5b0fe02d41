/// @file doctor.cpp
/// @brief Machine check: toolchain, GPU, libraries, with the command that fixes each gap.
#include "learner/doctor.hpp"

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <regex>
#include <sstream>

#include "base/process.hpp"

namespace gpulab::cli {
namespace {

std::string first_line(const std::string& s) {
  std::istringstream in(s);
  std::string line;
  std::getline(in, line);
  return line;
}

/// Runs a command quickly; its output, or nullopt-like "" with ok = false.
bool probe(const std::vector<std::string>& argv, std::string& out) {
  ProcessOptions o;
  o.timeout_s = 30;
  const ProcessResult r = run_process(argv, o);
  out = r.output;
  return r.exited(0);
}

std::string cache_value(const Paths& paths, const std::string& key) {
  const fs::path cache = paths.build / "CMakeCache.txt";
  if (!fs::exists(cache)) return "";
  std::istringstream in(read_text(cache));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) == 0) return line.substr(line.find('=') + 1);
  }
  return "";
}

/// The full path of @p command on PATH, or "".
std::string on_path(const std::string& command) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / command;
    if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

/// "2.28.3 (/usr/include/nccl.h)" from the header's NCCL_MAJOR/MINOR/PATCH, or "" without one.
std::string nccl_found() {
  for (const char* header : {"/usr/include/nccl.h", "/usr/local/cuda/include/nccl.h"}) {
    if (!fs::exists(header)) continue;
    const std::string text = read_text(header);
    std::smatch ma, mi, pa;
    if (std::regex_search(text, ma, std::regex(R"(#define NCCL_MAJOR (\d+))")) && std::regex_search(text, mi, std::regex(R"(#define NCCL_MINOR (\d+))")) &&
        std::regex_search(text, pa, std::regex(R"(#define NCCL_PATCH (\d+))"))) {
      return ma[1].str() + "." + mi[1].str() + "." + pa[1].str() + " (" + header + ")";
    }
    return std::string(header);
  }
  return "";
}

struct Item {
  std::string what, status, detail, fix;
  int severity;  // 0 ok, 2 limits the course (GPU parts, later labs, docs), 1 breaks the build
};

/// The Debian packages of cmake/dependencies.tsv, each found or not, with its version line.
std::vector<Item> listed_packages(const Paths& paths) {
  std::vector<Item> items;
  std::istringstream in(read_text(paths.root / "cmake" / "dependencies.tsv"));
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string package, check, name, role;
    std::getline(fields, package, '\t');
    std::getline(fields, check, '\t');
    std::getline(fields, name, '\t');
    std::getline(fields, role, '\t');
    std::string out, detail;
    bool ok = false;
    if (check.rfind("header:", 0) == 0) {
      const std::string header = check.substr(7);
      // .deps/<top folder>/<header>: scripts/fill-deps gives each package its own root.
      const fs::path carried = paths.root / ".deps" / header.substr(0, header.find('/'));
      for (const fs::path& where : {fs::path("/usr/include") / header, carried / header}) {
        if (!ok && fs::exists(where)) {
          ok = true;
          detail = where.string();
        }
      }
      if (!ok) detail = "no " + header + " in /usr/include or " + carried.string();
    } else {
      const std::string command = check.substr(check.find(':') + 1);
      ok = probe({command, "--version"}, out) || probe({command, "-V"}, out);  // iproute2's ip knows only -V
      const std::string where = on_path(command);
      detail = ok ? first_line(out) + (where.empty() ? "" : " (" + where + ")") : where.empty() ? "no " + command + " on PATH" : where + " does not run";
    }
    const int severity = ok ? 0 : role == "build" ? 1 : 2;
    items.push_back({name, ok ? "ok" : "missing", detail, ok ? "" : "apt-get install " + package, severity});
  }
  return items;
}

}  // namespace

int doctor(const Paths& paths, bool brief) {
  std::vector<Item> items;
  std::string out;

  if (fs::exists("/etc/os-release")) {
    std::smatch m;
    const std::string os = read_text("/etc/os-release");
    if (std::regex_search(os, m, std::regex("PRETTY_NAME=\"?([^\"\\n]*)"))) items.push_back({"system", "ok", m[1].str(), "", 0});
  }
  for (Item& i : listed_packages(paths)) items.push_back(i);

  const std::string nvcc = cache_value(paths, "CMAKE_CUDA_COMPILER");
  if (!nvcc.empty() && nvcc.find("NOTFOUND") == std::string::npos && probe({nvcc, "--version"}, out)) {
    std::smatch m;
    std::regex_search(out, m, std::regex("release ([0-9.]+)"));
    items.push_back({"CUDA toolkit", "ok", "nvcc " + m[1].str() + " (" + nvcc + ")", "", 0});
    const std::string arch = cache_value(paths, "CMAKE_CUDA_ARCHITECTURES");
    items.push_back({"CUDA architectures", "ok", arch + (arch == "native" ? " (the GPU of this machine)" : " (no GPU seen at configure time: compile-only)"), "", 0});
  } else {
    items.push_back({"CUDA toolkit", "missing", "no nvcc found (looked in PATH and /usr/local/cuda/bin)",
                     "install CUDA Toolkit 12.x or 13.x from NVIDIA's CUDA downloads page, then run ./gpulab again "
                     "(or set CUDACXX=/path/to/nvcc)", 1});
  }

  if (probe({"nvidia-smi", "--query-gpu=name,compute_cap,driver_version,memory.total", "--format=csv,noheader"}, out) &&
      !out.empty()) {
    std::istringstream gpus(out);
    for (std::string line; std::getline(gpus, line);) {
      std::smatch m;
      const bool old = std::regex_search(line, m, std::regex(", ([0-9]+)\\.([0-9]+),")) &&
                       std::stoi(m[1].str()) * 10 + std::stoi(m[2].str()) < 75;
      items.push_back({"GPU", old ? "too old" : "ok", line,
                       old ? "CUDA 13 needs compute capability 7.5 (Turing) or newer" : "", old ? 2 : 0});
    }
  } else {
    items.push_back({"GPU", "missing", "nvidia-smi found no NVIDIA GPU or driver",
                     "the [gpu] checks cannot run here; the [cpu] checks and builds still do. "
                     "On a machine with an NVIDIA GPU (sm_75+) install its driver", 2});
  }

  const std::string nccl = nccl_found();
  items.push_back({"NCCL (labs 07-09, multi-GPU)", nccl.empty() ? "missing" : "ok",
                   nccl.empty() ? "no nccl.h in /usr/include or /usr/local/cuda/include" : "NCCL " + nccl,
                   nccl.empty() ? "apt-get install libnccl-dev (NVIDIA's repository)" : "", nccl.empty() ? 2 : 0});
  std::string sanitizer = on_path("compute-sanitizer");
  if (sanitizer.empty() && fs::exists("/usr/local/cuda/bin/compute-sanitizer")) sanitizer = "/usr/local/cuda/bin/compute-sanitizer";
  if (!sanitizer.empty() && probe({sanitizer, "--version"}, out)) {
    std::smatch m;
    const bool versioned = std::regex_search(out, m, std::regex(R"(Version ([0-9.]+))"));
    items.push_back({"compute-sanitizer", "ok", (versioned ? m[1].str() + " " : std::string()) + "(" + sanitizer + ")", "", 0});
  } else {
    items.push_back({"compute-sanitizer", "missing", sanitizer.empty() ? "not on PATH nor in /usr/local/cuda/bin" : sanitizer + " does not run",
                     "part of the full CUDA toolkit (the cuda-sanitizer package); needed only for grade --sanitize", 2});
  }

  int worst = 0;
  std::cout << "gpulab doctor\n";
  for (const Item& i : items) {
    if (brief && i.severity == 0 && i.what != "GPU" && i.what != "CUDA toolkit") continue;
    char line[256];
    std::snprintf(line, sizeof line, "  %-8s %-30s %s", i.status.c_str(), i.what.c_str(), i.detail.c_str());
    std::cout << line << '\n';
    if (!i.fix.empty()) std::cout << "           → " << i.fix << '\n';
    if (i.severity == 1) worst = 1;
    if (i.severity == 2 && worst == 0) worst = 2;
  }
  std::cout << (worst == 0 ? "  ready: everything the course uses is here\n"
                : worst == 2 ? "  usable: the build and the CPU checks work; the parts marked above need what is missing\n"
                             : "  not ready: install what is marked missing above\n");
  return worst;
}

}  // namespace gpulab::cli
