/// @file doctor.cpp
/// @brief Machine check: toolchain, GPU, libraries, with the command that fixes each gap.
#include "doctor.hpp"

#include <iostream>
#include <regex>
#include <sstream>

#include "process.hpp"

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
      for (const fs::path& where : {fs::path("/usr/include") / header, paths.root / ".deps/include" / header}) {
        if (!ok && fs::exists(where)) {
          ok = true;
          detail = where.parent_path().string();
        }
      }
    } else {
      const std::string command = check.substr(check.find(':') + 1);
      ok = probe({command, "--version"}, out) || probe({command, "-V"}, out);  // iproute2's ip knows only -V
      detail = first_line(out);
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

  const bool nccl = fs::exists("/usr/include/nccl.h") || fs::exists("/usr/local/cuda/include/nccl.h");
  items.push_back({"NCCL (labs 07-09, multi-GPU)", nccl ? "ok" : "missing", "", nccl ? "" : "apt-get install libnccl-dev (NVIDIA's repository)", nccl ? 0 : 2});
  if (probe({"compute-sanitizer", "--version"}, out) || fs::exists("/usr/local/cuda/bin/compute-sanitizer")) {
    items.push_back({"compute-sanitizer", "ok", "", "", 0});
  } else {
    items.push_back({"compute-sanitizer", "missing", "", "part of the full CUDA toolkit; needed only for race and memory checks", 2});
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
