/// @file test_peaks.cpp
/// @brief The cache of measured device peaks: where it lives, what it accepts, what it refuses.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gpulab/peaks.hpp"

namespace fs = std::filesystem;

namespace {
gpulab::DevicePeaks sample() {
  gpulab::DevicePeaks p;
  p.device = "NVIDIA H200";
  p.uuid = "GPU-0123abcd-0000-1111-2222-333344445555";
  p.copy_gbs = 4270.0;
  p.fma_gflops = 65000.0;
  p.measured_at = "2026-11-30T03:00:00Z";
  return p;
}
}  // namespace

TEST_CASE("measured peaks are cached per device and damaged files are refused", "[cpu]") {
  const fs::path dir = fs::temp_directory_path() / ("gpulab-peaks-test-" + std::to_string(::getpid())) / "peaks";
  fs::remove_all(dir.parent_path());
  const gpulab::DevicePeaks p = sample();
  CHECK_FALSE(gpulab::load_cached_peaks(dir, p.uuid).has_value());  // nothing yet
  REQUIRE(gpulab::store_cached_peaks(dir, p));                       // creates the folder
  const auto back = gpulab::load_cached_peaks(dir, p.uuid);
  REQUIRE(back.has_value());
  CHECK(back->from_cache);
  CHECK(back->device == p.device);
  CHECK(back->copy_gbs == p.copy_gbs);
  CHECK(back->fma_gflops == p.fma_gflops);
  CHECK(back->measured_at == p.measured_at);
  // Another device has its own file.
  CHECK_FALSE(gpulab::load_cached_peaks(dir, "GPU-ffffffff-0000-1111-2222-333344445555").has_value());
  // A damaged file (truncated JSON, a zero peak, a file renamed to another device) is measured again.
  for (const std::string& text : {std::string("{\"device\": \"x\", \"uuid\""),
                                  p.to_json().dump().replace(p.to_json().dump().find("65000"), 5, "0"),
                                  gpulab::DevicePeaks{"x", "GPU-other", 1, 1, "t", false}.to_json().dump()}) {
    std::ofstream(dir / (p.uuid + ".json")) << text;
    CHECK_FALSE(gpulab::load_cached_peaks(dir, p.uuid).has_value());
  }
  // No temporary files are left behind.
  REQUIRE(gpulab::store_cached_peaks(dir, p));
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.path().extension() == ".json";
  CHECK(files == 1);
  fs::remove_all(dir.parent_path());
}

TEST_CASE("the peaks cache goes where the environment says", "[cpu]") {
  const char* keep_cache = std::getenv("GPULAB_CACHE_DIR");
  const char* keep_root = std::getenv("GPULAB_ROOT");
  const std::string saved_cache = keep_cache ? keep_cache : "", saved_root = keep_root ? keep_root : "";
  ::setenv("GPULAB_CACHE_DIR", "/tmp/somewhere", 1);
  CHECK(gpulab::peaks_cache_dir() == fs::path("/tmp/somewhere"));
  ::unsetenv("GPULAB_CACHE_DIR");
  ::setenv("GPULAB_ROOT", "/course", 1);
  CHECK(gpulab::peaks_cache_dir() == fs::path("/course/.gpulab/peaks"));
  ::unsetenv("GPULAB_ROOT");
  CHECK(gpulab::peaks_cache_dir().filename() == "peaks");
  if (keep_cache) ::setenv("GPULAB_CACHE_DIR", saved_cache.c_str(), 1);
  if (keep_root) ::setenv("GPULAB_ROOT", saved_root.c_str(), 1);
}
