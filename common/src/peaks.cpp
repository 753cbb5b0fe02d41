/// @file peaks.cpp
/// @brief The host side of peaks.hpp: the cache (no CUDA needed, unit-tested on any machine).
#include "gpulab/peaks.hpp"

#include <cstdlib>
#include <fstream>
#include <system_error>
#include <unistd.h>

namespace gpulab {

namespace fs = std::filesystem;

nlohmann::json DevicePeaks::to_json() const {
  return {{"device", device}, {"uuid", uuid}, {"copy_gbs", copy_gbs}, {"fma_gflops", fma_gflops}, {"measured_at", measured_at}};
}

std::optional<DevicePeaks> DevicePeaks::from_json(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  DevicePeaks p;
  try {
    p.device = j.at("device").get<std::string>();
    p.uuid = j.at("uuid").get<std::string>();
    p.copy_gbs = j.at("copy_gbs").get<double>();
    p.fma_gflops = j.at("fma_gflops").get<double>();
    p.measured_at = j.at("measured_at").get<std::string>();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  if (p.uuid.empty() || !(p.copy_gbs > 0.0) || !(p.fma_gflops > 0.0)) return std::nullopt;
  return p;
}

fs::path peaks_cache_dir() {
  if (const char* d = std::getenv("GPULAB_CACHE_DIR"); d && *d) return fs::path(d);
  if (const char* r = std::getenv("GPULAB_ROOT"); r && *r) return fs::path(r) / ".gpulab" / "peaks";
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "gpulab" / "peaks";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "gpulab" / "peaks";
  return fs::temp_directory_path() / "gpulab-peaks";
}

std::optional<DevicePeaks> load_cached_peaks(const fs::path& dir, const std::string& uuid) {
  std::ifstream in(dir / (uuid + ".json"));
  if (!in) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::optional<DevicePeaks> p = DevicePeaks::from_json(j);
  if (!p || p->uuid != uuid) return std::nullopt;
  p->from_cache = true;
  return p;
}

bool store_cached_peaks(const fs::path& dir, const DevicePeaks& peaks) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return false;
  const fs::path final_path = dir / (peaks.uuid + ".json");
  const fs::path tmp = dir / (peaks.uuid + ".json.tmp-" + std::to_string(::getpid()));
  {
    std::ofstream out(tmp);
    if (!out) return false;
    out << peaks.to_json().dump(2) << '\n';
    if (!out) return false;
  }
  fs::rename(tmp, final_path, ec);
  if (ec) fs::remove(tmp, ec);
  return !ec;
}

}  // namespace gpulab
