/// @file lab_scan.cpp
/// @brief `lab-scan`: what CMake needs to know about a lab, read with the CLI's own parsers, so
/// that the build and the CLI never read a lab two ways. cmake/GpulabLab.cmake compiles it at
/// configure time (with base/lab_config.cpp, regions.cpp and files.cpp) and runs it:
///
///     lab-scan facts ROOT SLUG       lab.json's facts as CMake `set()` lines (exit 0), or the
///                                    error naming the file and the key (exit 1)
///     lab-scan regions FILE NUMBER   the ids of FILE's SOLUTION regions, one per line (exit 0),
///                                    or the first malformed marker with file:line (exit 1)
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "base/files.hpp"
#include "base/lab_config.hpp"
#include "base/regions.hpp"

namespace {

/// @p items as a quoted CMake list.
std::string cmake_list(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ";") + item;
  return "\"" + out + "\"";
}

std::string cmake_list(const std::vector<int>& items) {
  std::vector<std::string> text;
  for (const int i : items) text.push_back(std::to_string(i));
  return cmake_list(text);
}

void print_facts(const gpulab::cli::LabConfig& lab) {
  const gpulab::cli::LabTargets& t = lab.targets;
  std::printf("set(GPULAB_LAB_SOURCES %s)\n", cmake_list(lab.sources).c_str());
  std::printf("set(GPULAB_LAB_TIMEOUT %g)\n", lab.timeout_s);
  std::printf("set(GPULAB_LAB_MPI_RANKS %s)\n", cmake_list(lab.mpi_ranks).c_str());
  std::printf("set(GPULAB_LAB_PERF_RANKS %s)\n", cmake_list(lab.perf_ranks).c_str());
  std::printf("set(GPULAB_LAB_TESTS %s)\n", cmake_list(t.tests).c_str());
  std::printf("set(GPULAB_LAB_LIBRARIES %s)\n", cmake_list(t.libraries).c_str());
  std::printf("set(GPULAB_LAB_MAIN gpulab_catch_main_%s)\n", t.main.c_str());
  std::printf("set(GPULAB_LAB_EMULATOR %s)\n", t.emulator ? "ON" : "OFF");
  std::printf("set(GPULAB_LAB_EMU_SOURCES %s)\n", cmake_list(t.emu_sources).c_str());
  std::printf("set(GPULAB_LAB_EMU_TESTS %s)\n", cmake_list(t.emu_tests).c_str());
  std::printf("set(GPULAB_LAB_ASSEMBLE_FOR %s)\n", cmake_list(t.assemble_for).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (argc != 4 || (mode != "facts" && mode != "regions")) {
    std::fprintf(stderr, "usage: lab-scan facts ROOT SLUG | lab-scan regions FILE LAB_NUMBER\n");
    return 2;
  }
  try {
    if (mode == "facts") {
      print_facts(gpulab::cli::load_lab(argv[2], argv[3]));
    } else {
      for (const auto& r : gpulab::cli::parse_regions(gpulab::cli::read_text(argv[2]), argv[2], argv[3])) std::printf("%s\n", r.id.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
