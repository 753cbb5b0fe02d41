/// @file junit.cpp
/// @brief A reader for CTest's JUnit files (see junit.hpp): attributes of <testcase> elements and
/// whether each holds a <failure> or <skipped> child. Enough XML for that file, no more.
#include "author/junit.hpp"

#include <stdexcept>

namespace gpulab::cli {
namespace {

std::string unescape(std::string s) {
  static const std::pair<const char*, const char*> entities[] = {{"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&amp;", "&"}};
  for (const auto& [from, to] : entities) {
    for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + 1)) s.replace(at, std::string(from).size(), to);
  }
  return s;
}

/// The value of attribute @p key in the tag text @p tag ("" when absent).
std::string attribute(const std::string& tag, const std::string& key) {
  const std::string needle = " " + key + "=\"";
  const std::size_t at = tag.find(needle);
  if (at == std::string::npos) return "";
  const std::size_t begin = at + needle.size(), end = tag.find('"', begin);
  return end == std::string::npos ? "" : unescape(tag.substr(begin, end - begin));
}

}  // namespace

std::vector<JunitCase> parse_junit(const std::string& xml) {
  if (xml.find("<testsuite") == std::string::npos) throw std::runtime_error("not a JUnit file (no <testsuite>)");
  std::vector<JunitCase> cases;
  for (std::size_t at = xml.find("<testcase"); at != std::string::npos; at = xml.find("<testcase", at + 1)) {
    const std::size_t tag_end = xml.find('>', at);
    if (tag_end == std::string::npos) break;
    const std::string tag = xml.substr(at, tag_end - at);
    JunitCase c{attribute(tag, "name"), attribute(tag, "status")};
    const bool self_closing = tag.back() == '/';
    const std::size_t close = self_closing ? tag_end : xml.find("</testcase>", tag_end);
    const std::string body = xml.substr(tag_end, (close == std::string::npos ? xml.size() : close) - tag_end);
    c.failed = body.find("<failure") != std::string::npos || c.status == "fail";
    c.skipped = body.find("<skipped") != std::string::npos || c.status == "notrun" || c.status == "disabled";
    cases.push_back(c);
  }
  return cases;
}

}  // namespace gpulab::cli
