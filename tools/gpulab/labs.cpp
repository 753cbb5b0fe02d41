/// @file labs.cpp
/// @brief Lab discovery and file helpers.
#include "labs.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace gpulab::cli {

Paths Paths::from_environment() {
  Paths p;
  const char* root = std::getenv("GPULAB_ROOT");
  p.root = fs::absolute(root != nullptr && *root ? fs::path(root) : fs::current_path());
  const char* build = std::getenv("GPULAB_BUILD_DIR");
  p.build = fs::absolute(build != nullptr && *build ? fs::path(build) : p.root / "build");
  return p;
}

std::string Lab::title() const {
  return meta.is_object() && meta.contains("title") ? meta["title"].get<std::string>() : slug;
}

std::vector<Lab> discover_labs(const Paths& paths) {
  std::vector<Lab> labs;
  const fs::path solutions = paths.root / "solutions";
  if (!fs::is_directory(solutions)) return labs;
  const std::regex slug_pattern(R"((\d\d)-[a-z0-9-]+)");
  for (const auto& entry : fs::directory_iterator(solutions)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || !std::regex_match(name, m, slug_pattern)) continue;
    Lab lab;
    lab.number = m[1].str();
    lab.slug = name;
    lab.solutions = entry.path();
    lab.labs = paths.root / "labs" / name;
    lab.tests = paths.root / "tests" / name;
    lab.lesson = paths.root / "lessons" / (name + ".md");
    for (const auto& f : fs::directory_iterator(entry.path())) {
      if (f.is_regular_file()) lab.files.push_back(f.path().filename().string());
    }
    std::sort(lab.files.begin(), lab.files.end());
    lab.meta = nlohmann::json::object();
    if (fs::exists(lab.tests / "lab.json")) lab.meta = nlohmann::json::parse(read_text(lab.tests / "lab.json"));
    labs.push_back(std::move(lab));
  }
  std::sort(labs.begin(), labs.end(), [](const Lab& a, const Lab& b) { return a.slug < b.slug; });
  return labs;
}

std::optional<Lab> find_lab(const Paths& paths, const std::string& name) {
  std::string number = name;
  if (name.size() == 1 && std::isdigit(static_cast<unsigned char>(name[0]))) number = "0" + name;
  for (Lab& lab : discover_labs(paths)) {
    if (lab.number == number || lab.slug == name) return lab;
  }
  return std::nullopt;
}

nlohmann::json load_labinfo(const Paths& paths, const std::string& number) {
  const fs::path file = paths.build / "labinfo" / (number + ".json");
  if (!fs::exists(file)) return nullptr;
  return nlohmann::json::parse(read_text(file));
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
  // Write to a temporary file, then rename: a crash never leaves half a file behind.
  const fs::path tmp = path.string() + ".gpulab-tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + path.string());
    out << text;
  }
  fs::rename(tmp, path);
}

std::string content_hash(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::vector<std::pair<std::string, std::string>> hash_tree(const fs::path& dir) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) {
      out.emplace_back(fs::relative(e.path(), dir).string(), content_hash(read_text(e.path())));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace gpulab::cli
