/// @file test_include_rules.cpp
/// @brief The CLI's subsystems keep their include rules: each folder of tools/gpulab says in its
/// README which folders it may include (`May include: base, run`); every include of a CLI header
/// names its folder and is one of those; the declared graph has no cycle; the top-level files
/// (main.cpp, commands.*) are included by no folder.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const fs::path kRoot = GPULAB_CLI_SOURCES;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// folder -> the folders its README allows (itself excluded).
std::map<std::string, std::set<std::string>> declared_rules() {
  std::map<std::string, std::set<std::string>> rules;
  for (const auto& e : fs::directory_iterator(kRoot)) {
    if (!e.is_directory()) continue;
    const std::string folder = e.path().filename().string();
    const std::string readme = slurp(e.path() / "README.md");
    std::smatch m;
    INFO("tools/gpulab/" << folder << "/README.md needs a line 'May include: a, b' or 'May include: (none)'");
    REQUIRE(std::regex_search(readme, m, std::regex("\\nMay include: ([^\\n]*)")));
    std::set<std::string>& allowed = rules[folder];
    std::stringstream list(m[1].str());
    for (std::string item; std::getline(list, item, ',');) {
      item.erase(0, item.find_first_not_of(' '));
      item.erase(item.find_last_not_of(' ') + 1);
      if (!item.empty() && item != "(none)") allowed.insert(item);
    }
  }
  return rules;
}

bool has_cycle(const std::map<std::string, std::set<std::string>>& g, const std::string& at, std::map<std::string, int>& state) {
  if (state[at] == 1) return true;
  if (state[at] == 2) return false;
  state[at] = 1;
  const auto it = g.find(at);
  if (it != g.end()) {
    for (const std::string& next : it->second) {
      if (has_cycle(g, next, state)) return true;
    }
  }
  state[at] = 2;
  return false;
}

}  // namespace

TEST_CASE("tools/gpulab keeps its include rules", "[cpu]") {
  const auto rules = declared_rules();
  REQUIRE(rules.size() >= 5);
  for (const auto& [folder, allowed] : rules) {
    for (const std::string& a : allowed) {
      INFO(folder << "/README.md allows '" << a << "', which is not a folder of tools/gpulab");
      CHECK(rules.count(a) == 1);
    }
  }
  std::map<std::string, int> state;
  for (const auto& [folder, allowed] : rules) {
    INFO("the folders' 'May include' lines form a cycle through " << folder);
    CHECK_FALSE(has_cycle(rules, folder, state));
  }

  // The headers of the CLI, by bare name, so that an include without its folder is caught.
  std::set<std::string> cli_headers;
  for (const auto& e : fs::recursive_directory_iterator(kRoot)) {
    if (e.path().extension() == ".hpp") cli_headers.insert(e.path().filename().string());
  }
  const std::regex include_line("#include \"([^\"]+)\"");
  int files = 0, includes = 0;
  for (const auto& e : fs::recursive_directory_iterator(kRoot)) {
    const std::string ext = e.path().extension().string();
    if (ext != ".cpp" && ext != ".hpp") continue;
    const fs::path rel = fs::relative(e.path(), kRoot);
    const bool top = rel.has_parent_path() == false;
    const std::string folder = top ? "" : rel.begin()->string();
    ++files;
    const std::string text = slurp(e.path());
    for (std::sregex_iterator it(text.begin(), text.end(), include_line), end; it != end; ++it) {
      const std::string target = (*it)[1].str();
      const auto slash = target.find('/');
      const std::string target_folder = slash == std::string::npos ? "" : target.substr(0, slash);
      INFO(rel.string() << " includes \"" << target << "\"");
      if (target_folder.empty()) {
        // A bare name: only a top-level file may be included so, and only by a top-level file.
        const bool cli_header = cli_headers.count(target) == 1;
        CHECK((!cli_header || (top && fs::exists(kRoot / target))));
        continue;
      }
      if (rules.count(target_folder) == 0) continue;  // common/ (gpulab/...), the emulator, libraries
      ++includes;
      if (top || target_folder == folder) continue;
      CHECK(rules.at(folder).count(target_folder) == 1);
    }
  }
  CHECK(files > 50);
  CHECK(includes > 50);
}
