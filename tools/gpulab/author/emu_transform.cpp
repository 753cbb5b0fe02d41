/// @file emu_transform.cpp
/// @brief CUDA → emulator C++ (see emu_transform.hpp).
#include "author/emu_transform.hpp"

#include <algorithm>
#include <cctype>
#include <regex>
#include <vector>

namespace gpulab::cli {
namespace {

/// Which characters of the text are code (not a comment, a string or a character literal).
std::vector<bool> code_mask(const std::string& s) {
  std::vector<bool> code(s.size(), true);
  for (std::size_t i = 0; i < s.size();) {
    std::size_t end = i;
    if (s.compare(i, 2, "//") == 0) {
      end = s.find('\n', i);
    } else if (s.compare(i, 2, "/*") == 0) {
      end = s.find("*/", i + 2);
      if (end != std::string::npos) end += 2;
    } else if (s[i] == '"' || s[i] == '\'') {
      const char quote = s[i];
      for (end = i + 1; end < s.size() && s[end] != quote; ++end) {
        if (s[end] == '\\') ++end;
      }
      if (end < s.size()) ++end;
    } else {
      ++i;
      continue;
    }
    if (end == std::string::npos) end = s.size();
    std::fill(code.begin() + static_cast<long>(i), code.begin() + static_cast<long>(end), false);
    i = end;
  }
  return code;
}

std::size_t line_of(const std::string& s, std::size_t pos) {
  return 1 + static_cast<std::size_t>(std::count(s.begin(), s.begin() + static_cast<long>(std::min(pos, s.size())), '\n'));
}

struct Edit {
  std::size_t begin, end;
  std::string text;
};

class Rewriter {
 public:
  Rewriter(const std::string& s, const std::string& where) : s_(s), where_(where), code_(code_mask(s)) {}

  std::string run() {
    launches();
    dynamic_shared();
    static_shared();
    std::sort(edits_.begin(), edits_.end(), [](const Edit& a, const Edit& b) { return a.begin > b.begin; });
    std::string out = s_;
    for (const Edit& e : edits_) {
      // Keep the line count: a launch written over several lines becomes one, plus its newlines,
      // so that the emulator's messages point at the learner's own lines.
      const auto before = std::count(s_.begin() + static_cast<long>(e.begin), s_.begin() + static_cast<long>(e.end), '\n');
      const auto now = std::count(e.text.begin(), e.text.end(), '\n');
      out.replace(e.begin, e.end - e.begin, e.text + std::string(static_cast<std::size_t>(std::max<long>(0, before - now)), '\n'));
    }
    return "#include \"emu.hpp\"\n#line 1 \"" + where_ + "\"\n" + out;
  }

 private:
  bool is_code(std::size_t i) const { return i < s_.size() && code_[i]; }
  std::size_t find_code(const std::string& what, std::size_t from) const {
    for (std::size_t p = s_.find(what, from); p != std::string::npos; p = s_.find(what, p + 1)) {
      if (is_code(p)) return p;
    }
    return std::string::npos;
  }
  [[noreturn]] void fail(std::size_t pos, const std::string& what) const {
    throw TransformError(where_ + ":" + std::to_string(line_of(s_, pos)) + ": " + what);
  }
  /// Index just past the bracket matching the one at @p open ((), {}, <>, []), skipping
  /// non-code; nested brackets of the other kinds are counted too.
  std::size_t match_forward(std::size_t open, char close) const {
    const char opener = s_[open];
    int depth = 0;
    for (std::size_t i = open; i < s_.size(); ++i) {
      if (!is_code(i)) continue;
      if (s_[i] == opener) ++depth;
      if (s_[i] == close && --depth == 0) return i + 1;
    }
    fail(open, std::string("no matching '") + close + "'");
  }
  std::size_t skip_space(std::size_t i) const {
    while (i < s_.size() && (std::isspace(static_cast<unsigned char>(s_[i])) || !is_code(i))) ++i;
    return i;
  }

  /// The callee before "<<<" at @p at: an identifier with qualifiers and template arguments.
  std::size_t callee_start(std::size_t at) const {
    std::size_t i = at;
    while (i > 0 && std::isspace(static_cast<unsigned char>(s_[i - 1]))) --i;
    if (i > 0 && s_[i - 1] == '>') {  // template arguments: walk back to the matching '<'
      int depth = 0;
      while (i > 0) {
        --i;
        if (s_[i] == '>') ++depth;
        if (s_[i] == '<' && --depth == 0) break;
      }
    }
    while (i > 0 && (std::isalnum(static_cast<unsigned char>(s_[i - 1])) || s_[i - 1] == '_' || s_[i - 1] == ':')) --i;
    return i;
  }

  void launches() {
    for (std::size_t p = find_code("<<<", 0); p != std::string::npos; p = find_code("<<<", p + 3)) {
      const std::size_t begin = callee_start(p);
      std::size_t name_end = p;
      while (name_end > begin && std::isspace(static_cast<unsigned char>(s_[name_end - 1]))) --name_end;
      const std::string callee = s_.substr(begin, name_end - begin);
      if (callee.empty()) fail(p, "a launch <<<...>>> without a kernel name before it");
      int depth = 0;
      std::size_t close = std::string::npos;
      for (std::size_t i = p + 3; i + 2 < s_.size(); ++i) {
        if (!is_code(i)) continue;
        if (s_[i] == '(' || s_[i] == '{' || s_[i] == '[') ++depth;
        if (s_[i] == ')' || s_[i] == '}' || s_[i] == ']') --depth;
        if (depth == 0 && s_.compare(i, 3, ">>>") == 0) {
          close = i;
          break;
        }
      }
      if (close == std::string::npos) fail(p, "a launch <<< without its >>>");
      const std::size_t args_open = skip_space(close + 3);
      if (args_open >= s_.size() || s_[args_open] != '(') fail(close, "a launch >>> not followed by its arguments");
      const std::size_t args_end = match_forward(args_open, ')');
      const std::size_t semicolon = skip_space(args_end);
      if (semicolon >= s_.size() || s_[semicolon] != ';') fail(args_end, "a launch that is not a statement of its own");
      const std::string config = s_.substr(p + 3, close - p - 3);
      const std::string args = s_.substr(args_open, args_end - args_open);
      edits_.push_back({begin, semicolon + 1,
                        "emu::Launch(" + config + ").of(" + callee + ").run([&] { " + callee + args + "; });"});
      p = semicolon;
    }
  }

  void dynamic_shared() {
    static const std::regex decl(R"(extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?([\w:]+(?:\s+[\w:]+)*?)\s+(\w+)\s*\[\s*\]\s*;)");
    for (auto it = std::sregex_iterator(s_.begin(), s_.end(), decl); it != std::sregex_iterator(); ++it) {
      const std::size_t at = static_cast<std::size_t>(it->position(0));
      if (!is_code(at)) continue;
      const std::string type = (*it)[1].str(), name = (*it)[2].str();
      edits_.push_back({at, at + static_cast<std::size_t>(it->length(0)), type + "* " + name + " = emu::dynamic_shared<" + type + ">();"});
    }
  }

  /// After each non-template kernel: the sum of its static __shared__ arrays, registered.
  void static_shared() {
    static const std::regex head(R"(__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s+)?(\w+)\s*\()");
    static const std::regex shared(R"((?:^|[^\w])__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?([\w:]+(?:\s+[\w:]+)*?)\s+(\w+)\s*((?:\[[^\]]+\])+)\s*;)");
    for (auto it = std::sregex_iterator(s_.begin(), s_.end(), head); it != std::sregex_iterator(); ++it) {
      const std::size_t at = static_cast<std::size_t>(it->position(0));
      if (!is_code(at) || is_template(at)) continue;
      const std::string name = (*it)[1].str();
      const std::size_t params_end = match_forward(at + static_cast<std::size_t>(it->length(0)) - 1, ')');
      const std::size_t open = skip_space(params_end);
      if (open >= s_.size() || s_[open] != '{') continue;  // a declaration, not the definition
      const std::size_t end = match_forward(open, '}');
      const std::string body = s_.substr(open, end - open);
      std::string sizes;
      for (auto m = std::sregex_iterator(body.begin(), body.end(), shared); m != std::sregex_iterator(); ++m) {
        // (extern __shared__ T name[] has no size, so it never matches; a comment may mention one)
        if (!is_code(open + body.find("__shared__", static_cast<std::size_t>(m->position(0))))) continue;
        sizes += (sizes.empty() ? "" : " + ") + std::string("sizeof(") + (*m)[1].str() + (*m)[3].str() + ")";
      }
      if (sizes.empty()) continue;
      edits_.push_back({end, end, "\nstatic emu::SharedRegistration emu_shared_" + name + "(reinterpret_cast<const void*>(&" + name +
                                      "), " + sizes + ");"});
    }
  }

  /// True when the declaration at @p at is preceded, since the last statement, by "template".
  bool is_template(std::size_t at) const {
    std::size_t i = at;
    while (i > 0 && s_[i - 1] != ';' && s_[i - 1] != '}' && s_[i - 1] != '{') --i;
    return find_code("template", i) < at;
  }

  const std::string& s_;
  std::string where_;
  std::vector<bool> code_;
  std::vector<Edit> edits_;
};

}  // namespace

std::string emulator_source(const std::string& source, const std::string& where) { return Rewriter(source, where).run(); }

}  // namespace gpulab::cli
