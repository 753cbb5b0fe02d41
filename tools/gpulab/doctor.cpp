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

}  // namespace

int doctor(const Paths& paths, bool brief) {
  struct Item {
    std::string what, status, detail, fix;
    int severity;  // 0 ok, 2 limits the course (GPU parts), 1 breaks the build
  };
  std::vector<Item> items;
  std::string out;

  if (fs::exists("/etc/os-release")) {
    std::smatch m;
    const std::string os = read_text("/etc/os-release");
    if (std::regex_search(os, m, std::regex("PRETTY_NAME=\"?([^\"\\n]*)"))) items.push_back({"system", "ok", m[1].str(), "", 0});
  }
  if (probe({"cmake", "--version"}, out)) {
    items.push_back({"CMake", "ok", first_line(out), "", 0});
  } else {
    items.push_back({"CMake", "missing", "", "apt-get install cmake (3.25 or newer)", 1});
  }
  if (probe({"c++", "--version"}, out)) items.push_back({"C++ compiler", "ok", first_line(out), "", 0});
  else items.push_back({"C++ compiler", "missing", "", "apt-get install g++", 1});

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

  const bool catch2 = fs::exists("/usr/include/catch2/catch.hpp") || fs::exists(paths.root / ".deps/include/catch2/catch.hpp");
  items.push_back({"Catch2 2.x", catch2 ? "ok" : "missing", "", catch2 ? "" : "apt-get install catch2 (or scripts/fill-deps)", catch2 ? 0 : 1});
  const bool cli11 = fs::exists("/usr/include/CLI/CLI.hpp") || fs::exists(paths.root / ".deps/include/CLI/CLI.hpp");
  items.push_back({"CLI11", cli11 ? "ok" : "missing", "", cli11 ? "" : "apt-get install libcli11-dev", cli11 ? 0 : 1});
  const bool json = fs::exists("/usr/include/nlohmann/json.hpp") || fs::exists(paths.root / ".deps/include/nlohmann/json.hpp");
  items.push_back({"nlohmann-json", json ? "ok" : "missing", "", json ? "" : "apt-get install nlohmann-json3-dev", json ? 0 : 1});

  // Needed by later labs and tools; missing ones limit those only.
  if (probe({"mpirun", "--version"}, out)) items.push_back({"OpenMPI (labs 07-09)", "ok", first_line(out), "", 0});
  else items.push_back({"OpenMPI (labs 07-09)", "missing", "", "apt-get install openmpi-bin libopenmpi-dev", 2});
  const bool nccl = fs::exists("/usr/include/nccl.h") || fs::exists("/usr/local/cuda/include/nccl.h");
  items.push_back({"NCCL (labs 07-09, multi-GPU)", nccl ? "ok" : "missing", "", nccl ? "" : "apt-get install libnccl-dev (NVIDIA's repository)", nccl ? 0 : 2});
  if (probe({"compute-sanitizer", "--version"}, out) || fs::exists("/usr/local/cuda/bin/compute-sanitizer")) {
    items.push_back({"compute-sanitizer", "ok", "", "", 0});
  } else {
    items.push_back({"compute-sanitizer", "missing", "", "part of the full CUDA toolkit; needed only for race and memory checks", 2});
  }

  if (probe({"doxygen", "--version"}, out)) {
    items.push_back({"Doxygen (./gpulab docs)", "ok", first_line(out), "", 0});
  } else {
    items.push_back({"Doxygen (./gpulab docs)", "missing", "", "apt-get install doxygen; needed only for the docs site", 2});
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
