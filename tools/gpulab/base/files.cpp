/// @file files.cpp
/// @brief Whole-file I/O and content hashes (see files.hpp).
#include "base/files.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "gpulab/hash.hpp"

namespace gpulab::cli {

std::string utf8_prefix(const std::string& text, std::size_t bytes) {
  if (text.size() <= bytes) return text;
  while (bytes > 0 && (static_cast<unsigned char>(text[bytes]) & 0xC0) == 0x80) --bytes;  // text[bytes] continues a character
  return text.substr(0, bytes);
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const fs::path& path, const std::string& text) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  const fs::path tmp = path.string() + ".gpulab-tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + path.string());
    out << text;
  }
  fs::rename(tmp, path);
}

void write_text_if_changed(const fs::path& path, const std::string& text) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec) && fs::file_size(path, ec) == text.size() && read_text(path) == text) return;
  write_text(path, text);
}

std::string content_hash(const std::string& text) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(gpulab::fnv1a64(text)));
  return hex;
}

TreeHashes hash_tree(const fs::path& dir) {
  TreeHashes out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.emplace_back(fs::relative(e.path(), dir).string(), content_hash(read_text(e.path())));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string first_tree_change(const TreeHashes& before, const TreeHashes& after, const std::string& prefix) {
  const std::map<std::string, std::string> a(before.begin(), before.end()), b(after.begin(), after.end());
  for (const auto& [path, hash] : a) {
    const auto it = b.find(path);
    if (it == b.end()) return prefix + path + " was removed";
    if (it->second != hash) return prefix + path + " changed";
  }
  for (const auto& [path, hash] : b) {
    if (!a.count(path)) return prefix + path + " was added";
  }
  return "";
}

}  // namespace gpulab::cli
