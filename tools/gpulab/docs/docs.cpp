/// @file docs.cpp
/// @brief Heading anchors for the Doxygen site (see docs.hpp).
#include "docs/docs.hpp"

#include <algorithm>
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

namespace {

/// @p code as Doxygen shows it literally inside <code>: HTML's characters escaped, and the ones
/// Doxygen's markdown and commands read (\\ @ * _ [ ] # $ %) each behind a backslash or as entities.
std::string literal_code(const std::string& code) {
  std::string out = "<code>";
  for (const char c : code) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      case '*': out += "&#42;"; break;
      case '_': out += "&#95;"; break;
      case '[': out += "&#91;"; break;
      case ']': out += "&#93;"; break;
      case '#': out += "&#35;"; break;
      case '\\': out += "&#92;"; break;
      case '@': out += "&#64;"; break;
      case '$': out += "&#36;"; break;
      case '%': out += "&#37;"; break;
      default: out += c;
    }
  }
  return out + "</code>";
}

/// One line's inline code spans as literal_code (Doxygen 1.9 loses a code span after a quote
/// on the same line, inside link text and inside bold: the site showed raw backticks and "****").
/// A link whose target the site does not have (a folder, a source file) keeps its text only; a
/// bold that holds nothing but a code span loses the bold. A line with an unpaired backtick is
/// left alone.
std::string rewrite_code_spans(const std::string& line) {
  if (std::count(line.begin(), line.end(), '`') % 2 != 0) return line;
  std::string out;
  for (std::size_t i = 0; i < line.size();) {
    if (line[i] != '`') {
      out += line[i++];
      continue;
    }
    const std::size_t end = line.find('`', i + 1);
    out += literal_code(line.substr(i + 1, end - i - 1));
    i = end + 1;
  }
  // [<code>x</code>](target): a target that is a page (.md), a web address or an anchor stays a link.
  for (std::size_t at = out.find("[<code>"); at != std::string::npos; at = out.find("[<code>", at + 1)) {
    const std::size_t close = out.find("</code>](", at);
    if (close == std::string::npos || out.find(']', at) < close) continue;
    const std::size_t target = close + 9, stop = out.find(')', target);
    if (stop == std::string::npos) continue;
    const std::string where = out.substr(target, stop - target);
    const bool page = where.rfind("http", 0) == 0 || where.rfind("#", 0) == 0 || where.find(".md") != std::string::npos;
    if (!page) out = out.substr(0, at) + out.substr(at + 1, close + 7 - at - 1) + out.substr(stop + 1);
  }
  for (std::size_t at = out.find("**<code>"); at != std::string::npos; at = out.find("**<code>", at + 1)) {
    const std::size_t close = out.find("</code>**", at);
    if (close != std::string::npos && out.find("<code>", at + 8) > close) out = out.substr(0, at) + out.substr(at + 2, close + 7 - at - 2) + out.substr(close + 9);
  }
  return out;
}

}  // namespace

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
    if (hashes == 0 || hashes == std::string::npos || line[hashes] != ' ') line = rewrite_code_spans(line);  // headings keep theirs (anchors)
    out << line << '\n';
  }
  return out.str();
}

}  // namespace gpulab::cli
