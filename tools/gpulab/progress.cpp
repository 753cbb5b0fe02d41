/// @file progress.cpp
/// @brief Progress and next (see progress.hpp).
#include "progress.hpp"

#include <cstdio>
#include <ctime>
#include <random>
#include <iostream>

#include "lab_config.hpp"

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

std::string signature(const Paths& paths, nlohmann::json entry) {
  entry.erase("check");
  return content_hash(secret(paths) + entry.dump());
}

}  // namespace

void record_progress(const Paths& paths, const GradeResult& result, const std::string& number) {
  const Counts n = result.card.counts();
  std::string first_failure;
  for (const Check& c : result.checks()) {
    if (first_failure.empty() && (c.status == Status::kFail || c.status == Status::kEmuFail)) first_failure = c.name;
  }
  nlohmann::json all = load_progress(paths);
  nlohmann::json entry = {{"passed", n.passed}, {"failed", n.failed}, {"not_run", n.not_run}, {"emulated_ok", n.emulated_ok},
                          {"exit", result.exit_code}, {"first_failure", first_failure}, {"date", today()}};
  entry["check"] = signature(paths, entry);
  all[number] = entry;
  write_text(paths.state_dir() / "progress.json", all.dump(2) + "\n");
}

nlohmann::json load_progress(const Paths& paths) {
  const fs::path file = paths.state_dir() / "progress.json";
  if (!fs::exists(file)) return nlohmann::json::object();
  auto j = nlohmann::json::parse(read_text(file), nullptr, false);
  if (!j.is_object()) return nlohmann::json::object();
  for (auto& [number, entry] : j.items()) {
    if (!entry.is_object() || !entry.contains("check")) {
      entry = {{"tampered", "recorded by an older gpulab: grade it again"}};
    } else if (entry.value("check", "") != signature(paths, entry)) {
      entry = {{"tampered", "its record was changed outside the grader"}};
    }
  }
  return j;
}

std::string progress_line(const nlohmann::json& progress, const std::string& number) {
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
    const nlohmann::json p = progress.value(lab.number, nlohmann::json());
    if (complete(p)) continue;
    std::cout << "Next: lab " << lab.number << " — " << lab.title << " (" << progress_line(progress, lab.number) << ")\n"
              << "  read   lessons/" << lab.slug << ".md\n"
              << "  edit   labs/" << lab.slug << "/\n"
              << "  grade  ./gpulab grade " << lab.number << "\n";
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
