/// @file learner.cpp
/// @brief Progress, next, hints and watch (see learner.hpp).
#include "learner.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <iostream>
#include <thread>

#include "regions.hpp"

namespace gpulab::cli {
namespace {

fs::path state_dir(const Paths& paths) { return paths.root / ".gpulab"; }

nlohmann::json load_json(const fs::path& file) {
  if (!fs::exists(file)) return nlohmann::json::object();
  auto j = nlohmann::json::parse(read_text(file), nullptr, false);
  return j.is_object() ? j : nlohmann::json::object();
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", std::localtime(&now));
  return buf;
}

bool complete(const nlohmann::json& p) { return p.is_object() && p.value("failed", 1) == 0; }

}  // namespace

void record_progress(const Paths& paths, const GradeResult& result, const std::string& number) {
  int passed = 0, failed = 0, not_run = 0;
  std::string first_failure;
  for (const Check& c : result.checks) {
    passed += c.status == "pass";
    not_run += c.status == "not-run";
    if (c.status == "fail") {
      if (first_failure.empty()) first_failure = c.name;
      ++failed;
    }
  }
  nlohmann::json all = load_progress(paths);
  all[number] = {{"passed", passed}, {"failed", failed}, {"not_run", not_run}, {"exit", result.exit_code},
                 {"first_failure", first_failure}, {"date", today()}};
  write_text(state_dir(paths) / "progress.json", all.dump(2) + "\n");
}

nlohmann::json load_progress(const Paths& paths) { return load_json(state_dir(paths) / "progress.json"); }

std::string progress_line(const nlohmann::json& progress, const std::string& number) {
  if (!progress.contains(number)) return "not graded yet";
  const auto& p = progress[number];
  const int passed = p.value("passed", 0), failed = p.value("failed", 0), not_run = p.value("not_run", 0);
  if (failed == 0 && not_run == 0) return "complete (" + p.value("date", "") + ")";
  if (failed == 0) return "complete where it can run here; " + std::to_string(not_run) + " checks need a GPU";
  return "in progress: " + std::to_string(passed) + " of " + std::to_string(passed + failed + not_run) +
         " checks pass (last graded " + p.value("date", "") + ")";
}

int next_lab(const Paths& paths) {
  const nlohmann::json progress = load_progress(paths);
  for (const Lab& lab : discover_labs(paths)) {
    const nlohmann::json p = progress.value(lab.number, nlohmann::json());
    if (complete(p)) continue;
    std::cout << "Next: lab " << lab.number << " — " << lab.title() << " (" << progress_line(progress, lab.number) << ")\n"
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

int hint(const Paths& paths, const std::string& lab_name, const std::string& todo, int level, bool reset) {
  const auto lab = find_lab(paths, lab_name);
  if (!lab) {
    std::cout << "gpulab hint: no lab \"" << lab_name << "\"\n";
    return 1;
  }
  // The TODOs, with their titles, from the reference's regions (titles only: never the code).
  std::vector<Region> regions;
  for (const std::string& f : lab->files) {
    for (Region& r : parse_regions(read_text(lab->solutions / f), (lab->solutions / f).string(), lab->number)) {
      regions.push_back(r);
    }
  }
  // In TODO order (02.2 before 02.10), not file order.
  auto minor = [](const Region& r) { return std::stoi(r.id.substr(r.id.find('.') + 1)); };
  std::sort(regions.begin(), regions.end(), [&](const Region& a, const Region& b) { return minor(a) < minor(b); });
  const nlohmann::json ladders = lab->meta.value("todo_hints", nlohmann::json::object());
  auto ladder_of = [&](const Region& r) {
    std::vector<std::string> steps = ladders.value(r.id, std::vector<std::string>{});
    steps.push_back("Read lessons/" + lab->slug + ".md, section \"TODO(" + r.id + ")\": it says what to write and why.");
    return steps;
  };
  if (todo.empty()) {
    std::cout << "Lab " << lab->number << " — " << lab->title() << ": hints per TODO (./gpulab hint " << lab->number << " <k>)\n";
    for (const Region& r : regions) {
      std::cout << "  " << r.id << "  " << r.title << "  (" << ladder_of(r).size() << " hints)\n";
    }
    return 0;
  }
  const std::string id = todo.find('.') == std::string::npos ? lab->number + "." + todo : todo;
  const auto it = std::find_if(regions.begin(), regions.end(), [&](const Region& r) { return r.id == id; });
  if (it == regions.end()) {
    std::cout << "gpulab hint: lab " << lab->number << " has no TODO(" << id << ")\n";
    return 1;
  }
  const std::vector<std::string> steps = ladder_of(*it);
  const fs::path seen_file = state_dir(paths) / "hints.json";
  nlohmann::json seen = load_json(seen_file);
  if (reset) seen.erase(id);
  int show = level > 0 ? level : seen.value(id, 0) + 1;
  show = std::min<int>(show, static_cast<int>(steps.size()));
  std::cout << "TODO(" << id << "): " << it->title << "\n";
  for (int k = 1; k <= show; ++k) std::cout << "  hint " << k << "/" << steps.size() << ": " << steps[static_cast<std::size_t>(k - 1)] << "\n";
  if (show < static_cast<int>(steps.size())) std::cout << "  (run it again for the next hint)\n";
  if (level <= 0) {
    seen[id] = show;
    write_text(seen_file, seen.dump(2) + "\n");
  }
  return 0;
}

int watch(const Paths& paths, GradeOptions options, int max_runs, double poll_s) {
  const auto lab = find_lab(paths, options.lab);
  if (!lab) {
    std::cout << "gpulab watch: no lab \"" << options.lab << "\"\n";
    return 1;
  }
  const fs::path dir = options.submission.empty() ? lab->labs : fs::path(options.submission);
  auto stamp = [&] {
    std::string s;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.is_regular_file()) s += e.path().filename().string() + std::to_string(e.last_write_time().time_since_epoch().count()) + ";";
    }
    return s;
  };
  int runs = 0, last_exit = 0;
  std::string seen = stamp();
  for (;;) {
    std::cout << "\n── gpulab watch: grading " << dir.string() << " ──\n";
    const GradeResult result = grade(paths, options);
    last_exit = result.exit_code;
    if (options.submission.empty() && !options.solutions && options.cases.empty()) {
      record_progress(paths, result, lab->number);
    }
    ++runs;
    if (max_runs > 0 && runs >= max_runs) return last_exit;
    std::cout << "── waiting for a change in " << dir.string() << " (Ctrl-C to stop) ──" << std::endl;
    for (std::string now = stamp(); now == seen; now = stamp()) {
      std::this_thread::sleep_for(std::chrono::duration<double>(poll_s));
    }
    // Let the editor finish writing (several files, or write-then-rename) before grading.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    seen = stamp();
  }
}

}  // namespace gpulab::cli
