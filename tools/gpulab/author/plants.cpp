/// @file plants.cpp
/// @brief Planted submissions: manifest, patching, verdicts (see plants.hpp).
#include "author/plants.hpp"

#include <algorithm>
#include <set>

#include "base/process.hpp"

namespace gpulab::cli {
namespace {

using json = nlohmann::json;

Plant::Expect parse_expect(const json& j, const Plant::Expect& fallback) {
  Plant::Expect e = fallback;
  if (j.contains("expect_exit")) e.exit = j["expect_exit"].is_array() ? j["expect_exit"].get<std::vector<int>>() : std::vector<int>{j["expect_exit"].get<int>()};
  e.failed = j.value("expect_failed", e.failed);
  e.detail = j.value("expect_detail", e.detail);
  return e;
}

Plant parse_plant(const json& j, const std::string& where) {
  static const std::set<std::string> known = {"name", "patch", "needs_gpu", "cases", "ranks", "timeout_s", "sanitize", "expect_exit",
                                              "expect_failed", "expect_detail", "expect_passed", "expect_no_leftovers", "without_gpu", "note",
                                              "all_cases", "max_seconds", "interrupt", "sandbox", "needs_root", "busy_processes"};
  for (const auto& [key, value] : j.items()) {
    if (!known.count(key)) throw ConfigError(where + ": unknown key \"" + key + "\"");
  }
  Plant p;
  p.name = j.value("name", "");
  p.patch = j.value("patch", "");
  if (p.name.empty() || p.patch.empty()) throw ConfigError(where + ": every plant needs a \"name\" and a \"patch\"");
  p.needs_gpu = j.value("needs_gpu", false);
  p.cases = j.value("cases", std::vector<std::string>{});
  p.ranks = j.value("ranks", std::vector<int>{3});
  p.timeout_s = j.value("timeout_s", 0.0);
  p.sanitize = j.value("sanitize", false);
  p.all_cases = j.value("all_cases", false);
  p.max_seconds = j.value("max_seconds", 0.0);
  p.interrupt = j.value("interrupt", false);
  p.sandbox = j.value("sandbox", true);
  p.needs_root = j.value("needs_root", false);
  p.busy_processes = j.value("busy_processes", 0);
  if (p.busy_processes < 0 || p.busy_processes > 8) throw ConfigError(where + ": \"busy_processes\" must be 0 to 8");
  p.expect = parse_expect(j, {});
  if (j.contains("without_gpu")) {
    p.has_without_gpu = true;
    p.without_gpu = parse_expect(j["without_gpu"], p.expect);
  }
  p.must_pass = j.value("expect_passed", std::vector<std::string>{});
  p.no_leftovers = j.value("expect_no_leftovers", false);
  return p;
}

/// A check's name matches @p want as given, or as "<want> (W=n)" for a distributed case.
bool same_check(const Check& c, const std::string& want) { return c.name == want || c.name.rfind(want + " (W=", 0) == 0; }

}  // namespace

std::vector<Plant> load_plants(const LabConfig& lab) {
  const fs::path file = lab.tests / "planted" / "plants.json";
  if (!fs::exists(file)) return {};
  const json all = json::parse(read_text(file), nullptr, false);
  const std::string where = "tests/" + lab.slug + "/planted/plants.json";
  if (!all.is_array()) throw ConfigError(where + ": expected a list of plants");
  std::vector<Plant> plants;
  for (std::size_t i = 0; i < all.size(); ++i) {
    plants.push_back(parse_plant(all[i], where + " entry " + std::to_string(i + 1)));
    if (!fs::exists(lab.tests / "planted" / plants.back().patch)) throw ConfigError(where + ": no patch file " + plants.back().patch);
  }
  return plants;
}

std::string apply_plant(const LabConfig& lab, const Plant& plant, const fs::path& dir) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const std::string& f : lab.sources) fs::copy_file(lab.solutions / f, dir / f);
  ProcessOptions o;
  o.cwd = dir.string();
  // Outside any repository (the build tree may sit inside this one): paths are the patch's own.
  o.env = {{"GIT_CEILING_DIRECTORIES", dir.parent_path().string()}};
  const ProcessResult r = run_process({"git", "apply", "--whitespace=nowarn", (lab.tests / "planted" / plant.patch).string()}, o);
  return r.exited(0) ? "" : "the patch no longer applies to solutions/" + lab.slug + " (" + r.output + "): make it again with git diff";
}

GradeOptions plant_grade_options(const LabConfig& lab, const Plant& plant, const fs::path& dir) {
  GradeOptions g;
  g.lab = lab.number;
  g.submission = dir.string();
  g.quiet = true;
  g.seed = 12345;
  g.rounds = 1;
  g.max_rounds = 3;
  g.perf_time_cap_s = 60;
  g.timeout_s = plant.timeout_s;
  g.sanitize = plant.sanitize;
  g.sandbox = plant.sandbox;
  // Distributed labs: one width is enough to catch a plant (default: a W that is not a power of
  // two, the case most likely to expose chunk arithmetic), which keeps CI short.
  g.ranks = plant.ranks;
  g.cases = plant.cases;
  static const std::set<std::string> build_steps = {"compile", "link with the tests", "no forbidden library calls"};
  if (g.cases.empty() && !plant.all_cases && !plant.expect.failed.empty() && !build_steps.count(plant.expect.failed)) g.cases = {plant.expect.failed};
  return g;
}

std::string plant_verdict(const Plant& plant, const Plant::Expect& expect, const GradeResult& r) {
  if (std::find(expect.exit.begin(), expect.exit.end(), r.exit_code) == expect.exit.end()) {
    return "exit " + std::to_string(r.exit_code) + ", expected " + json(expect.exit).dump();
  }
  bool found = expect.failed.empty();
  for (const Check& c : r.checks()) {
    if (!same_check(c, expect.failed) || (c.status != Status::kFail && c.status != Status::kEmuFail)) continue;
    std::string all;
    for (const auto& d : c.details) all += d + "\n";
    found = found || expect.detail.empty() || all.find(expect.detail) != std::string::npos;
  }
  if (!found) return "check \"" + expect.failed + "\" did not fail" + (expect.detail.empty() ? "" : " with \"" + expect.detail + "\"");
  for (const std::string& want : plant.must_pass) {
    for (const Check& c : r.checks()) {
      if (same_check(c, want) && c.status != Status::kPass && c.status != Status::kEmuPass) return "\"" + c.name + "\" should pass but did not";
    }
  }
  return "";
}

}  // namespace gpulab::cli
