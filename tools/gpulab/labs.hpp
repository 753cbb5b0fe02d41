/// @file labs.hpp
/// @brief Where things are: the source tree, the build tree, the labs and their metadata.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpulab::cli {

namespace fs = std::filesystem;

/// The source tree (the folder holding ./gpulab) and the build tree (build/ by default).
struct Paths {
  fs::path root;
  fs::path build;
  /// From GPULAB_ROOT / GPULAB_BUILD_DIR (set by ./gpulab), else the current directory.
  static Paths from_environment();
};

/// One lab, as the source tree describes it (no build needed).
struct Lab {
  std::string number;  ///< "01"
  std::string slug;    ///< "01-hello-kernel"
  fs::path solutions, labs, tests, lesson;
  std::vector<std::string> files;  ///< file names in solutions/<slug>, sorted
  nlohmann::json meta;             ///< tests/<slug>/lab.json (an empty object if absent)
  std::string title() const;
};

/// Every lab with a folder in solutions/, in order.
std::vector<Lab> discover_labs(const Paths& paths);
/// The lab named by "1", "01" or "01-hello-kernel"; nullopt if none.
std::optional<Lab> find_lab(const Paths& paths, const std::string& name);

/// build/labinfo/NN.json, written by CMake (executables, objects, regions); null if absent.
nlohmann::json load_labinfo(const Paths& paths, const std::string& number);

std::string read_text(const fs::path& path);
void write_text(const fs::path& path, const std::string& text);
/// A stable 64-bit content hash (FNV-1a), as 16 hex digits. Not for security.
std::string content_hash(const std::string& text);
/// Hashes of every regular file under @p dir (recursive), keyed by relative path.
std::vector<std::pair<std::string, std::string>> hash_tree(const fs::path& dir);

}  // namespace gpulab::cli
