/// @file docs.cpp
/// @brief Heading anchors for the Doxygen site (see docs.hpp).
#include "docs.hpp"

#include <cctype>
#include <sstream>

namespace gpulab::cli {

std::string github_anchor(const std::string& heading) {
  std::string anchor;
  for (std::size_t i = 0; i < heading.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(heading[i]);
    if (c >= 0x80) {
      // A multi-byte UTF-8 character: GitHub keeps letters (α, β), drops symbols (→, ×, ²).
      // The Greek and Latin letters used in the lessons are 2-byte sequences (lead byte C2–CF);
      // arrows and maths symbols are 3-byte (lead E2).
      std::size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
      if (len == 2 && c >= 0xCE) anchor += heading.substr(i, len);
      i += len - 1;
    } else if (std::isalnum(c) || c == '-' || c == '_') {
      anchor += static_cast<char>(std::tolower(c));
    } else if (c == ' ') {
      anchor += '-';
    }
  }
  return anchor;
}

std::string doxygen_markdown(const std::string& text, const std::string& path) {
  if (path.size() < 3 || path.compare(path.size() - 3, 3, ".md") != 0) return text;
  // Doxygen's labels are global to the site: every file's anchors get its name as a prefix
  // ("07-collectives-the-lab"), and its own "(#anchor)" links are rewritten to match.
  std::string stem = path.substr(path.find_last_of('/') + 1);
  stem = "md-" + github_anchor(stem.substr(0, stem.size() - 3));  // labels must start with a letter
  std::istringstream in(text);
  std::ostringstream out;
  bool fenced = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) fenced = !fenced;
    if (fenced) {
      out << line << '\n';
      continue;
    }
    const std::size_t hashes = line.find_first_not_of('#');
    if (hashes >= 1 && hashes <= 6 && hashes != std::string::npos && line[hashes] == ' ' &&
        line.find("{#") == std::string::npos) {
      line += " {#" + stem + "-" + github_anchor(line.substr(hashes + 1)) + "}";
    }
    for (std::size_t at = line.find("](#"); at != std::string::npos; at = line.find("](#", at + 3)) {
      line.insert(at + 3, stem + "-");
    }
    out << line << '\n';
  }
  return out.str();
}

}  // namespace gpulab::cli
