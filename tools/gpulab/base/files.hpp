/// @file files.hpp
/// @brief File I/O the CLI shares: whole-file reads, atomic writes, content hashes of files and
/// trees (gpulab/hash.hpp's FNV-1a).
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace gpulab::cli {

/// The first @p bytes of @p text or fewer, never cutting a UTF-8 character in two (a cut one makes
/// the scorecard's JSON invalid: nlohmann's dump throws on it).
std::string utf8_prefix(const std::string& text, std::size_t bytes);

namespace fs = std::filesystem;

/// The whole file; throws std::runtime_error naming it when it cannot be read.
std::string read_text(const fs::path& path);
/// Writes through a temporary file and a rename: a crash never leaves half a file behind.
void write_text(const fs::path& path, const std::string& text);
/// write_text unless @p path already holds @p text (its time stamp then stays: the build's
/// rendered sources do not recompile every variant each time the CLI is rebuilt; Ninja's restat).
void write_text_if_changed(const fs::path& path, const std::string& text);
/// FNV-1a of @p text as 16 hex digits (stable across runs and machines; not for security).
std::string content_hash(const std::string& text);
/// (relative path, content hash) of every regular file under @p dir, sorted; empty if absent.
using TreeHashes = std::vector<std::pair<std::string, std::string>>;
TreeHashes hash_tree(const fs::path& dir);
/// The first path whose hash differs between @p before and @p after ("" when none), with what
/// happened to it: "labs/x.cu changed", "... was added", "... was removed".
std::string first_tree_change(const TreeHashes& before, const TreeHashes& after, const std::string& prefix);

}  // namespace gpulab::cli
