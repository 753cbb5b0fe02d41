/// @file region_scan.cpp
/// @brief `region-scan FILE LAB_NUMBER`: prints the ids of FILE's SOLUTION regions, one per line
/// (exit 0), or the first malformed marker with file:line (exit 1). CMake compiles and runs it at
/// configure time (cmake/GpulabLab.cmake) to create one mutant per region, so the build and the
/// CLI read regions with one grammar: regions.cpp.
#include <cstdio>
#include <exception>

#include "base/files.hpp"
#include "base/regions.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: region-scan FILE LAB_NUMBER\n");
    return 2;
  }
  try {
    for (const auto& r : gpulab::cli::parse_regions(gpulab::cli::read_text(argv[1]), argv[1], argv[2])) {
      std::printf("%s\n", r.id.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
