/// @file progress.cpp
/// @brief Progress and next (see progress.hpp).
#include "learner/progress.hpp"

#include <cstdio>
#include <ctime>
#include <random>
#include <iostream>

#include "base/lab_config.hpp"

namespace gpulab::cli {
namespace {

std::string today() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", std::localtime(&now));
  return buf;
}

bool complete(const nlohmann::json& p) { return p.is_object() && !p.contains("tampered") && p.value("failed", 1) == 0; }

/// A per-tree secret (.gpulab/secret, made on first use): progress entries carry a hash of their
/// content with it, so that an entry written by anything but the grader reads as such.
std::string secret(const Paths& paths) {
  const fs::path file = paths.state_dir() / "secret";
  if (fs::exists(file)) return read_text(file);
  std::random_device device;
  char text[33];
  std::snprintf(text, sizeof text, "%08x%08x%08x%08x", device(), device(), device(), device());
  write_text(file, text);
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
  return text;
}

/// Bound to its key too: an entry copied from "04/1" to "04/2" reads as changed.
std::string signature(const Paths& paths, const std::string& key, nlohmann::json entry) {
  entry.erase("check");
  return content_hash(secret(paths) + key + "\n" + entry.dump());
}

/// The signed entry for @p checks (a whole grade, or the checks of one part).
nlohmann::json progress_entry(const Paths& paths, const std::string& key, const std::vector<Check>& checks) {
  Scorecard card(true, nullptr);
  std::string first_failure;
  for (const Check& c : checks) {
    card.keep(c);
    if (first_failure.empty() && (c.status == Status::kFail || c.status == Status::kEmuFail)) first_failure = c.name;
  }
  const Counts n = card.counts();
  nlohmann::json entry = {{"passed", n.passed}, {"failed", n.failed}, {"not_run", n.not_run}, {"emulated_ok", n.emulated_ok},
                          {"exit", card.exit_code()}, {"first_failure", first_failure}, {"date", today()}, {"v", 2}};
  entry["check"] = signature(paths, key, entry);
  return entry;
}

}  // namespace

std::string part_key(const std::string& number, int part) { return number + "/" + std::to_string(part); }

void record_progress(const Paths& paths, const GradeResult& result, const std::string& number, int part, int parts) {
  nlohmann::json all = load_progress(paths);
  if (part > 0) {
    all[part_key(number, part)] = progress_entry(paths, part_key(number, part), result.checks());
  } else {
    all[number] = progress_entry(paths, number, result.checks());
    // A whole grade of a lab in parts grades every part: each part's cases, and what all share
    // (the build; a case no part's test files hold, part 0, counts against every part).
    for (int k = 1; k <= parts; ++k) {
      std::vector<Check> mine;
      for (const Check& c : result.checks()) {
        const int of = c.data.is_object() && c.data.contains("part") ? c.data.value("part", 0) : 0;
        if (of == 0 || of == k) mine.push_back(c);
      }
      all[part_key(number, k)] = progress_entry(paths, part_key(number, k), mine);
    }
  }
  write_text(paths.state_dir() / "progress.json", all.dump(2) + "\n");
}

nlohmann::json load_progress(const Paths& paths) {
  const fs::path file = paths.state_dir() / "progress.json";
  if (!fs::exists(file)) return nlohmann::json::object();
  auto j = nlohmann::json::parse(read_text(file), nullptr, false);
  if (!j.is_object()) return nlohmann::json::object();
  for (auto& [number, entry] : j.items()) {
    if (!entry.is_object() || !entry.contains("check") || entry.value("v", 1) < 2) {
      entry = {{"tampered", "recorded by an older gpulab: grade it again"}};
    } else if (entry.value("check", "") != signature(paths, number, entry)) {
      entry = {{"tampered", "its record was changed outside the grader"}};
    }
  }
  return j;
}

std::string progress_line(const nlohmann::json& progress, const std::string& number, int parts) {
  if (parts > 0) {
    std::string line;
    for (int k = 1; k <= parts; ++k) line += (k > 1 ? "; " : "") + ("part " + std::to_string(k) + ": ") + progress_line(progress, part_key(number, k));
    return line;
  }
  if (!progress.contains(number)) return "not graded yet";
  const auto& p = progress[number];
  if (p.contains("tampered")) return "not graded yet (" + p.value("tampered", std::string("?")) + ")";
  const int passed = p.value("passed", 0), failed = p.value("failed", 0), not_run = p.value("not_run", 0);
  if (failed == 0 && not_run == 0) return "complete (" + p.value("date", "") + ")";
  if (failed == 0) return "complete where it can run here; " + std::to_string(not_run) + " checks need a GPU";
  return "in progress: " + std::to_string(passed) + " of " + std::to_string(passed + failed + not_run) + " checks pass (last graded " +
         p.value("date", "") + ")";
}

int next_lab(const Paths& paths) {
  const nlohmann::json progress = load_progress(paths);
  for (const LabConfig& lab : discover_labs(paths)) {
    nlohmann::json p = progress.value(lab.number, nlohmann::json());
    // A lab in parts is complete when every part is (its last grades), as `list` shows it.
    if (lab.parts.empty() && complete(p)) continue;
    // A lab in parts: the first part not complete is what to do next.
    int part = 0;
    for (int k = 1; k <= static_cast<int>(lab.parts.size()) && part == 0; ++k) {
      const nlohmann::json q = progress.value(part_key(lab.number, k), nlohmann::json());
      if (!complete(q)) {
        part = k;
        p = q;
      }
    }
    if (!lab.parts.empty() && part == 0) continue;
    const LabPart* current = lab.part(part);
    std::cout << "Next: lab " << lab.number << " — " << lab.title << (current ? ", part " + std::to_string(part) + ": " + current->title : std::string())
              << " (" << progress_line(progress, current ? part_key(lab.number, part) : lab.number) << ")\n"
              << "  read   lessons/" << lab.slug << ".md\n";
    if (current) {
      std::string files;
      for (const std::string& f : current->sources) files += (files.empty() ? "" : ", ") + ("labs/" + lab.slug + "/" + f);
      std::cout << "  edit   " << files << "\n"
                << "  grade  ./gpulab grade " << lab.number << " --part " << part << "\n";
    } else {
      std::cout << "  edit   labs/" << lab.slug << "/\n"
                << "  grade  ./gpulab grade " << lab.number << "\n";
    }
    if (p.is_object() && !p.value("first_failure", "").empty()) {
      std::cout << "  first failing check last time: " << p.value("first_failure", "") << "\n"
                << "  stuck? ./gpulab hint " << lab.number << "\n";
    }
    return 0;
  }
  std::cout << "Every available lab is complete where it can run here. The rest of the path is in curriculum.md.\n";
  return 0;
}

}  // namespace gpulab::cli
