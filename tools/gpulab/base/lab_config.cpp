/// @file lab_config.cpp
/// @brief lab.json and labinfo, parsed and checked (see lab_config.hpp).
#include "base/lab_config.hpp"

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>
#include <sstream>

#include "base/regions.hpp"

namespace gpulab::cli {
namespace {

using json = nlohmann::json;

/// Checks that @p object is an object holding only @p allowed keys.
void only_keys(const json& object, const std::set<std::string>& allowed, const std::string& where) {
  if (!object.is_object()) throw ConfigError(where + ": expected an object, found " + object.dump());
  for (const auto& [key, value] : object.items()) {
    if (allowed.count(key)) continue;
    std::string known;
    for (const auto& k : allowed) known += (known.empty() ? "" : ", ") + k;
    throw ConfigError(where + ": unknown key \"" + key + "\" (known: " + known + ")");
  }
}

/// object[key] as T, or @p fallback when absent; a wrong type names the key.
template <class T>
T get(const json& object, const std::string& key, const T& fallback, const std::string& where) {
  if (!object.contains(key)) return fallback;
  try {
    return object.at(key).get<T>();
  } catch (const json::exception&) {
    throw ConfigError(where + ": \"" + key + "\" has the wrong type (" + object.at(key).dump() + ")");
  }
}

double fraction(const json& object, const std::string& key, const std::string& where) {
  const double v = get<double>(object, key, 0.0, where);
  if (v < 0.0 || v > 1.5) throw ConfigError(where + ": \"" + key + "\" must be a fraction (0 to 1.5), not " + std::to_string(v));
  return v;
}

std::vector<int> ranks(const json& object, const std::string& key, const std::string& where) {
  const auto w = get<std::vector<int>>(object, key, {}, where);
  for (int r : w) {
    if (r < 1 || r > 256) throw ConfigError(where + ": \"" + key + "\" holds " + std::to_string(r) + " ranks (1 to 256)");
  }
  return w;
}

Variant parse_variant(const json& v, const std::string& where) {
  only_keys(v, {"target", "exe", "compile", "objects"}, where);
  return {get<std::string>(v, "target", "", where), get<std::string>(v, "exe", "", where),
          get<std::vector<std::string>>(v, "compile", {}, where), get<std::vector<std::string>>(v, "objects", {}, where)};
}

std::map<std::string, Variant> parse_variants(const json& j, const std::string& key, const std::string& where) {
  std::map<std::string, Variant> out;
  if (!j.contains(key)) return out;
  for (const auto& [name, v] : j.at(key).items()) out[name] = parse_variant(v, where + " " + key + "." + name);
  return out;
}

/// The checks that need the tree: sources present, hints naming regions that exist.
void check_against_tree(LabConfig& lab, const std::string& where) {
  if (lab.sources.empty()) throw ConfigError(where + ": \"sources\" lists no file");
  std::set<std::string> ids;
  for (const std::string& f : lab.sources) {
    const fs::path file = lab.solutions / f;
    if (!fs::is_regular_file(file)) throw ConfigError(where + ": source \"" + f + "\" is not in solutions/" + lab.slug + "/");
    for (const Region& r : parse_regions(read_text(file), file.string(), lab.number)) ids.insert(r.id);
  }
  for (const auto& [id, steps] : lab.todo_hints) {
    if (!ids.count(id)) throw ConfigError(where + ": todo_hints names TODO(" + id + "), which no source has");
  }
  for (const LabPart& part : lab.parts) {
    for (const std::string& f : part.tests) {
      if (!fs::is_regular_file(lab.tests / f)) throw ConfigError(where + ": part \"" + part.title + "\" names test file \"" + f + "\", which tests/" + lab.slug + "/ does not have");
    }
  }
  if (lab.targets.tests.empty()) throw ConfigError(where + ": \"build\" is missing (its \"tests\" are the test sources the build compiles)");
  for (const std::string& f : lab.targets.tests) {
    if (!fs::is_regular_file(lab.tests / f)) throw ConfigError(where + ": \"build.tests\" names \"" + f + "\", which tests/" + lab.slug + "/ does not have");
  }
}

/// Every item of @p items is one of @p allowed; else an error naming @p key and what it may hold.
void each_in(const std::vector<std::string>& items, const std::vector<std::string>& allowed, const std::string& key, const std::string& where) {
  for (const std::string& item : items) {
    if (std::find(allowed.begin(), allowed.end(), item) != allowed.end()) continue;
    std::string known;
    for (const std::string& a : allowed) known += (known.empty() ? "" : ", ") + a;
    throw ConfigError(where + ": \"" + key + "\" holds \"" + item + "\", which is not one of " + (known.empty() ? "(none)" : known));
  }
}

LabTargets parse_targets(const json& b, const LabConfig& lab, const std::string& where) {
  if (!b.is_object()) throw ConfigError(where + ": must be an object");
  only_keys(b, {"tests", "libraries", "main", "emulator", "assemble_for"}, where);
  LabTargets t;
  t.tests = get<std::vector<std::string>>(b, "tests", {}, where);
  if (t.tests.empty()) throw ConfigError(where + ": \"tests\" is missing (the test sources beside lab.json)");
  // Plain file names only: CMake reads these lists (lab_scan.cpp), where a quote, a semicolon or a
  // dollar would mean something else.
  static const std::regex file_name(R"([A-Za-z0-9_+-][A-Za-z0-9_.+-]*\.(cpp|cu))");
  for (const std::string& f : t.tests) {
    if (!std::regex_match(f, file_name)) throw ConfigError(where + ": \"tests\" holds \"" + f + "\" (a .cpp or .cu file beside lab.json)");
  }
  for (const std::string& f : lab.sources) {
    if (!std::regex_match(f, std::regex(R"([A-Za-z0-9_+-][A-Za-z0-9_.+-]*)"))) {
      throw ConfigError(where + ": source \"" + f + "\" is not a plain file name (letters, digits, . _ + -)");
    }
  }
  t.libraries = get<std::vector<std::string>>(b, "libraries", {}, where);
  each_in(t.libraries, kLabLibraries, "libraries", where);
  t.main = get<std::string>(b, "main", "cuda", where);
  each_in({t.main}, {"cuda", "mpi"}, "main", where);
  if ((t.main == "mpi") != lab.distributed()) {
    throw ConfigError(where + ": \"main\" is \"" + t.main + "\" but the lab " + (lab.distributed() ? "has" : "has no") +
                      " \"mpi_ranks\" (\"mpi\" runs every case under mpirun at each W)");
  }
  if (b.contains("emulator")) {
    const json& e = b.at("emulator");
    if (e.is_boolean()) {
      t.emulator = e.get<bool>();
    } else if (e.is_object()) {
      only_keys(e, {"sources", "tests"}, where + " emulator");
      t.emulator = true;
      t.emu_sources = get<std::vector<std::string>>(e, "sources", {}, where + " emulator");
      t.emu_tests = get<std::vector<std::string>>(e, "tests", {}, where + " emulator");
      each_in(t.emu_sources, lab.sources, "emulator.sources", where);
      each_in(t.emu_tests, t.tests, "emulator.tests", where);
    } else {
      throw ConfigError(where + ": \"emulator\" is true, false or {\"sources\": [...], \"tests\": [...]}");
    }
    if (t.emulator && t.main != "cuda") throw ConfigError(where + ": \"emulator\" is for kernel labs (\"main\": \"cuda\")");
  }
  t.assemble_for = get<std::vector<std::string>>(b, "assemble_for", {}, where);
  for (const std::string& arch : t.assemble_for) {
    if (!std::regex_match(arch, std::regex(R"(\d{2,3}[a-z]?-(real|virtual))"))) {
      throw ConfigError(where + ": \"assemble_for\" holds \"" + arch + "\" (CMake's form: \"80-real\", \"90a-real\")");
    }
  }
  if (!t.assemble_for.empty() && std::none_of(lab.sources.begin(), lab.sources.end(), [](const std::string& f) {
        return f.size() > 3 && f.compare(f.size() - 3, 3, ".cu") == 0;
      })) {
    throw ConfigError(where + ": \"assemble_for\" names architectures for the reference's .cu files, and \"sources\" has none");
  }
  return t;
}

GpuCheck parse_gpu_check(const json& g, const std::string& where) {
  if (!g.is_object()) throw ConfigError(where + ": must be an object");
  only_keys(g, {"risk", "sass", "grades"}, where);
  GpuCheck c{get<int>(g, "risk", 0, where), get<bool>(g, "sass", false, where), {}};
  if (c.risk < 0) throw ConfigError(where + ": \"risk\" is 1 (first) or more");
  const json grades = get<json>(g, "grades", json::array(), where);
  if (!grades.is_array()) throw ConfigError(where + ": \"grades\" must be a list");
  for (std::size_t k = 0; k < grades.size(); ++k) {
    const std::string w = where + " grades[" + std::to_string(k + 1) + "]";
    only_keys(grades[k], {"name", "args", "env", "repeat"}, w);
    GpuGrade grade{get<std::string>(grades[k], "name", "", w), get<std::vector<std::string>>(grades[k], "args", {}, w),
                   get<std::map<std::string, std::string>>(grades[k], "env", {}, w), get<int>(grades[k], "repeat", 1, w)};
    if (!std::regex_match(grade.name, std::regex("[a-z0-9][a-z0-9-]*"))) throw ConfigError(w + ": \"name\" is a file name: a-z, 0-9 and -");
    if (grade.repeat < 1 || grade.repeat > 10) throw ConfigError(w + ": \"repeat\" is 1 to 10");
    // scripts/gpu-check reads the plan as tab-separated fields, env as words and args split on \x1f.
    for (const auto& [key, value] : grade.env) {
      if (!std::regex_match(key, std::regex("[A-Z_][A-Z0-9_]*")) || value.find_first_of(" \t\n\x1f") != std::string::npos) {
        throw ConfigError(w + ": \"env\" holds " + key + "=" + value + " (a NAME and a value without spaces)");
      }
    }
    for (const std::string& a : grade.args) {
      if (a.empty() || a.find_first_of("\t\n\x1f") != std::string::npos) throw ConfigError(w + ": \"args\" holds an empty item or a tab or newline");
    }
    c.grades.push_back(grade);
  }
  return c;
}

}  // namespace

const Variant* BuildInfo::variant(const std::string& name) const {
  const auto it = variants.find(name);
  return it == variants.end() ? nullptr : &it->second;
}

namespace {

std::string visibility_of(const json& object, const std::string& fallback, const std::string& where) {
  const std::string v = get<std::string>(object, "visibility", fallback, where);
  if (v != "visible" && v != "hidden" && v != "after_due_date" && v != "after_published" && !(v.empty() && fallback.empty())) {
    throw ConfigError(where + ": \"visibility\" must be visible, hidden, after_due_date or after_published, not \"" + v + "\"");
  }
  return v;
}

double non_negative(const json& object, const std::string& key, double fallback, const std::string& where) {
  const double v = get<double>(object, key, fallback, where);
  if (!(v >= 0.0)) throw ConfigError(where + ": \"" + key + "\" must be 0 or more");
  return v;
}

}  // namespace

Points parse_points(const json& j, const std::string& where) {
  if (!j.is_object()) throw ConfigError(where + ": must be an object");
  only_keys(j, {"correctness", "performance", "performance_floor", "visibility", "cases"}, where);
  Points p;
  p.correctness = non_negative(j, "correctness", p.correctness, where);
  p.performance = non_negative(j, "performance", p.performance, where);
  p.performance_floor = get<double>(j, "performance_floor", p.performance_floor, where);
  if (!(p.performance_floor >= 0.0 && p.performance_floor < 1.0)) throw ConfigError(where + ": \"performance_floor\" must be in [0, 1)");
  p.visibility = visibility_of(j, p.visibility, where);
  const json cases = get<json>(j, "cases", json::object(), where);
  if (!cases.is_object()) throw ConfigError(where + ": \"cases\" must be an object (case name -> points, visibility)");
  for (const auto& [name, c] : cases.items()) {
    const std::string w = where + ".cases." + name;
    if (!c.is_object()) throw ConfigError(w + ": must be an object");
    only_keys(c, {"points", "visibility"}, w);
    p.cases[name] = {c.contains("points") ? non_negative(c, "points", 0.0, w) : -1.0, visibility_of(c, "", w)};
  }
  return p;
}

LabConfig parse_lab_json(const std::string& text, const std::string& where) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) throw ConfigError(where + ": not valid JSON");
  only_keys(j, {"title", "sources", "timeout_s", "mpi_ranks", "perf_ranks", "forbidden_symbols", "performance", "profile", "hints",
                "todo_hints", "parts", "build", "gpu_check", "points"},
            where);
  LabConfig lab;
  lab.title = get<std::string>(j, "title", "", where);
  if (lab.title.empty()) throw ConfigError(where + ": \"title\" is missing");
  lab.sources = get<std::vector<std::string>>(j, "sources", {}, where);
  lab.timeout_s = get<double>(j, "timeout_s", 120.0, where);
  if (lab.timeout_s <= 0) throw ConfigError(where + ": \"timeout_s\" must be positive");
  lab.mpi_ranks = ranks(j, "mpi_ranks", where);
  lab.perf_ranks = j.contains("perf_ranks") ? ranks(j, "perf_ranks", where) : lab.mpi_ranks;
  if (!lab.perf_ranks.empty() && lab.mpi_ranks.empty()) throw ConfigError(where + ": \"perf_ranks\" without \"mpi_ranks\"");
  if (j.contains("forbidden_symbols")) {
    const json& f = j["forbidden_symbols"];
    const std::string w = where + " forbidden_symbols";
    only_keys(f, {"called", "namespaces", "headers", "why"}, w);
    lab.forbidden = {get<std::vector<std::string>>(f, "called", {}, w), get<std::vector<std::string>>(f, "namespaces", {}, w),
                     get<std::string>(f, "why", "this lab asks you to write it yourself", w),
                     get<std::map<std::string, std::vector<std::string>>>(f, "headers", {}, w)};
    for (const auto& [file, headers] : lab.forbidden.headers) {
      if (std::find(lab.sources.begin(), lab.sources.end(), file) == lab.sources.end()) {
        throw ConfigError(w + ".headers: \"" + file + "\" is not one of the lab's sources");
      }
    }
  }
  const json performance = get<json>(j, "performance", json::object(), where);
  for (const auto& [id, spec] : performance.items()) {
    const std::string w = where + " performance." + id;
    only_keys(spec, {"min_fraction_of_reference", "reference_min_fraction_of_baseline", "hint", "min_fraction_of_link", "link_gate_max_nodes",
                     "target_basis", "target_measured"}, w);
    lab.performance[id] = {fraction(spec, "min_fraction_of_reference", w), fraction(spec, "reference_min_fraction_of_baseline", w),
                           get<std::string>(spec, "hint", "", w), fraction(spec, "min_fraction_of_link", w),
                           get<int>(spec, "link_gate_max_nodes", 0, w), get<std::string>(spec, "target_basis", "", w),
                           get<bool>(spec, "target_measured", true, w)};
    if (!lab.performance[id].target_measured && lab.performance[id].target_basis.empty()) {
      throw ConfigError(w + ": an unmeasured target needs \"target_basis\" (the figure it rests on)");
    }
    if (lab.performance[id].min_fraction_of_link > 0 && lab.performance[id].link_gate_max_nodes < 2) {
      throw ConfigError(w + ": \"min_fraction_of_link\" needs \"link_gate_max_nodes\" >= 2 (the most nodes it is judged at)");
    }
  }
  if (j.contains("points")) lab.points = parse_points(j["points"], where + " points");
  const json profile = get<json>(j, "profile", json::array(), where);
  if (!profile.is_array()) throw ConfigError(where + ": \"profile\" must be a list");
  for (const json& p : profile) {
    const std::string w = where + " profile";
    only_keys(p, {"range", "case", "max_kernels", "max_bytes_factor"}, w);
    ProfileSpec s{get<std::string>(p, "range", "", w), get<std::string>(p, "case", "", w), get<int>(p, "max_kernels", 1, w),
                  get<double>(p, "max_bytes_factor", 1.3, w)};
    if (s.range.empty() || s.case_name.empty() || s.max_kernels < 1 || s.max_bytes_factor < 1.0) {
      throw ConfigError(w + ": each entry needs a \"range\", a \"case\", max_kernels >= 1 and max_bytes_factor >= 1");
    }
    lab.profile.push_back(s);
  }
  const json hints = get<json>(j, "hints", json::object(), where);
  only_keys(hints, {"timeout", "crash"}, where + " hints");
  lab.timeout_hint = get<std::string>(hints, "timeout", "a loop that never ends, or a wait for something that never comes", where);
  lab.crash_hint = get<std::string>(hints, "crash", "the test process crashed", where);
  const json todo_hints = get<json>(j, "todo_hints", json::object(), where);
  if (!todo_hints.is_object()) throw ConfigError(where + ": \"todo_hints\" must be an object");
  for (const auto& [id, steps] : todo_hints.items()) lab.todo_hints[id] = get<std::vector<std::string>>(todo_hints, id, {}, where + " todo_hints");
  const json parts = get<json>(j, "parts", json::array(), where);
  if (!parts.is_array()) throw ConfigError(where + ": \"parts\" must be a list");
  std::map<std::string, int> source_part, test_part;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const std::string w = where + " parts[" + std::to_string(k + 1) + "]";
    only_keys(parts[k], {"title", "sources", "tests"}, w);
    LabPart part{get<std::string>(parts[k], "title", "", w), get<std::vector<std::string>>(parts[k], "sources", {}, w),
                 get<std::vector<std::string>>(parts[k], "tests", {}, w)};
    if (part.title.empty() || part.sources.empty() || part.tests.empty()) throw ConfigError(w + ": each part needs a \"title\", \"sources\" and \"tests\"");
    for (const std::string& f : part.sources) {
      if (std::find(lab.sources.begin(), lab.sources.end(), f) == lab.sources.end()) throw ConfigError(w + ": source \"" + f + "\" is not in \"sources\"");
      if (!source_part.emplace(f, static_cast<int>(k)).second) throw ConfigError(w + ": source \"" + f + "\" is in two parts");
    }
    for (const std::string& f : part.tests) {
      if (!test_part.emplace(f, static_cast<int>(k)).second) throw ConfigError(w + ": test file \"" + f + "\" is in two parts");
    }
    lab.parts.push_back(part);
  }
  for (const std::string& f : lab.sources) {
    if (!lab.parts.empty() && !source_part.count(f)) throw ConfigError(where + ": \"parts\" leave source \"" + f + "\" out");
  }
  if (j.contains("build")) lab.targets = parse_targets(j.at("build"), lab, where + " build");
  if (j.contains("gpu_check")) lab.gpu_check = parse_gpu_check(j.at("gpu_check"), where + " gpu_check");
  return lab;
}

BuildInfo parse_labinfo(const std::string& text, const std::string& where) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) throw ConfigError(where + ": not valid JSON (delete build/ and run ./gpulab again)");
  BuildInfo b;
  b.configured = true;
  b.buildable = get<bool>(j, "buildable", false, where);
  b.reason = get<std::string>(j, "reason", "", where);
  b.submission_dir = get<std::string>(j, "submission_dir", "", where);
  b.grader_files = get<std::vector<std::string>>(j, "grader_files", {}, where);
  b.variants = parse_variants(j, "variants", where);
  b.mutants = parse_variants(j, "mutants", where);
  b.emu_mutants = parse_variants(j, "emu_mutants", where);
  const json regions = get<json>(j, "regions", json::array(), where);
  for (const auto& r : regions) {
    b.regions.push_back({get<std::string>(r, "id", "", where), get<std::string>(r, "file", "", where)});
  }
  return b;
}

LabConfig load_lab(const fs::path& root, const std::string& slug) {
  const fs::path json_file = root / "tests" / slug / "lab.json";
  if (!fs::exists(json_file)) throw ConfigError("solutions/" + slug + " has no tests/" + slug + "/lab.json");
  const std::string where = "tests/" + slug + "/lab.json";
  LabConfig lab = parse_lab_json(read_text(json_file), where);
  lab.number = slug.substr(0, 2);
  lab.slug = slug;
  lab.solutions = root / "solutions" / slug;
  lab.labs = root / "labs" / slug;
  lab.tests = root / "tests" / slug;
  lab.lesson = root / "lessons" / (slug + ".md");
  check_against_tree(lab, where);
  return lab;
}

std::vector<LabConfig> discover_labs(const Paths& paths) {
  std::vector<LabConfig> labs;
  const fs::path solutions = paths.root / "solutions";
  if (!fs::is_directory(solutions)) return labs;
  static const std::regex slug_pattern(R"((\d\d)-[a-z0-9-]+)");
  for (const auto& entry : fs::directory_iterator(solutions)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || !std::regex_match(name, m, slug_pattern)) continue;
    LabConfig lab = load_lab(paths.root, name);
    const fs::path info = paths.build / "labinfo" / (lab.number + ".json");
    if (fs::exists(info)) lab.build = parse_labinfo(read_text(info), info.string());
    labs.push_back(std::move(lab));
  }
  std::sort(labs.begin(), labs.end(), [](const LabConfig& a, const LabConfig& b) { return a.slug < b.slug; });
  return labs;
}

std::optional<LabConfig> find_lab(const Paths& paths, const std::string& name) {
  std::string number = name;
  if (name.size() == 1 && std::isdigit(static_cast<unsigned char>(name[0]))) number = "0" + name;
  for (LabConfig& lab : discover_labs(paths)) {
    if (lab.number == number || lab.slug == name) return lab;
  }
  return std::nullopt;
}

std::vector<std::string> CaseInfo::todos(const std::string& number) const {
  std::vector<std::string> ids;
  static const std::regex todo(R"(\[(\d\d\.\d+)\])");
  for (auto it = std::sregex_iterator(tags.begin(), tags.end(), todo); it != std::sregex_iterator(); ++it) {
    if ((*it)[1].str().rfind(number + ".", 0) == 0) ids.push_back((*it)[1].str());
  }
  return ids;
}

std::vector<CaseInfo> parse_case_list(const std::string& listing) {
  std::vector<CaseInfo> cases;
  std::istringstream in(listing);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    CaseInfo c;
    if (std::getline(fields, c.where, '\t') && std::getline(fields, c.name, '\t') && std::getline(fields, c.tags, '\t')) {
      std::getline(fields, c.file);  // absent in listings of older builds
      if (c.where == "cpu" || c.where == "gpu") cases.push_back(c);
    }
  }
  return cases;
}

std::vector<CaseInfo> cases_named(const std::vector<CaseInfo>& cases, const std::string& name) {
  for (const CaseInfo& c : cases) {
    if (c.name == name) return {c};
  }
  auto lower = [](std::string t) {
    std::transform(t.begin(), t.end(), t.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    return t;
  };
  const std::string want = lower(name);
  std::vector<CaseInfo> found;
  for (const CaseInfo& c : cases) {
    if (!want.empty() && lower(c.name).find(want) != std::string::npos) found.push_back(c);
  }
  return found;
}

std::vector<CaseInfo> listed_cases(const Paths& paths, const LabConfig& lab) {
  const fs::path file = paths.build / "labinfo" / (lab.number + "-cases.txt");
  return fs::exists(file) ? parse_case_list(read_text(file)) : std::vector<CaseInfo>{};
}

int part_of(const LabConfig& lab, const CaseInfo& c) {
  for (std::size_t k = 0; k < lab.parts.size(); ++k) {
    const auto& tests = lab.parts[k].tests;
    if (std::find(tests.begin(), tests.end(), c.file) != tests.end()) return static_cast<int>(k) + 1;
  }
  return 0;
}

std::vector<std::string> stretch_todos(const LabConfig& lab, const std::vector<CaseInfo>& cases) {
  std::map<std::string, bool> all_stretch;  // TODO id → every case naming it is [stretch]
  for (const CaseInfo& c : cases) {
    for (const std::string& id : c.todos(lab.number)) {
      const auto it = all_stretch.find(id);
      all_stretch[id] = (it == all_stretch.end() ? true : it->second) && c.stretch();
    }
  }
  std::vector<std::string> out;
  for (const auto& [id, stretch] : all_stretch) {
    if (stretch) out.push_back(id);
  }
  return out;
}

}  // namespace gpulab::cli
