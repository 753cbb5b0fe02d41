/// @file peaks.hpp
/// @brief The device's own ceilings, measured once and cached per device: the bandwidth of a
/// large device-to-device copy and the fp32 FMA throughput of a kernel that does nothing else.
///
/// Datasheet peaks are leads, not yardsticks: clocks, power limits and ECC move them. The scorecard
/// states a kernel's figure as a fraction of these measured ceilings (and the roofline is drawn
/// with them). Measuring takes a few seconds, so the result is kept in a small JSON file per
/// device (keyed by its UUID) in peaks_cache_dir(); delete the file, or set
/// GPULAB_REMEASURE_PEAKS=1, to measure again.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace gpulab {

/// Measured ceilings of one device.
struct DevicePeaks {
  std::string device;       ///< its name, e.g. "NVIDIA H200"
  std::string uuid;         ///< "GPU-" and 32 hex digits, as nvidia-smi prints it
  double copy_gbs = 0.0;    ///< device-to-device cudaMemcpy, read + write, GB/s
  double fma_gflops = 0.0;  ///< fp32 FMA throughput, GFLOP/s (an FMA counts 2)
  std::string measured_at;  ///< UTC, ISO 8601
  bool from_cache = false;  ///< read from the cache rather than measured by this process

  /// The cache file's contents (from_cache is not stored).
  nlohmann::json to_json() const;
  /// Empty when a field is missing or not positive (a damaged cache file is measured again).
  static std::optional<DevicePeaks> from_json(const nlohmann::json& j);
};

/// Where the cache lives: $GPULAB_CACHE_DIR; else $GPULAB_ROOT/.gpulab/peaks (the course tree,
/// ignored by git); else $XDG_CACHE_HOME/gpulab/peaks or ~/.cache/gpulab/peaks.
std::filesystem::path peaks_cache_dir();

/// The cached peaks of device @p uuid in @p dir, if a valid file is there.
std::optional<DevicePeaks> load_cached_peaks(const std::filesystem::path& dir, const std::string& uuid);

/// Writes @p peaks to @p dir (created if needed), atomically (a temporary file, then a rename).
/// Returns false, writing nothing, when the folder cannot be written.
bool store_cached_peaks(const std::filesystem::path& dir, const DevicePeaks& peaks);

/// The current device's peaks: from the cache, or measured now (and cached). Needs a GPU.
DevicePeaks measured_peaks();

}  // namespace gpulab
