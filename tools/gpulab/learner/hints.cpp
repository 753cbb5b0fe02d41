/// @file hints.cpp
/// @brief Hint ladders (see hints.hpp).
#include "learner/hints.hpp"

#include <algorithm>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "base/lab_config.hpp"
#include "base/regions.hpp"

namespace gpulab::cli {
namespace {

/// The course's own headers ("nn.hpp") that @p file includes, directly or through the lab's
/// interface headers in @p tests_dir, in the order met.
void library_headers(const fs::path& file, const fs::path& tests_dir, std::set<std::string>& seen, std::vector<std::string>& out) {
  if (!fs::is_regular_file(file) || !seen.insert(file.string()).second) return;
  std::istringstream in(read_text(file));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("#include \"", 0) != 0) continue;
    const std::size_t end = line.find('"', 10);
    if (end == std::string::npos) continue;
    const std::string name = line.substr(10, end - 10);
    if (name.rfind("gpulab/", 0) == 0) {
      if (std::find(out.begin(), out.end(), name.substr(7)) == out.end()) out.push_back(name.substr(7));
    } else {
      library_headers(tests_dir / name, tests_dir, seen, out);
    }
  }
}

/// " The library calls checkpoint.cpp can make are declared in common/include/gpulab/nn.hpp." ("" when
/// it uses none): the API a TODO needs is part of its first hint, not a thing to guess.
std::string library_note(const LabConfig& lab, const std::string& file) {
  std::set<std::string> seen;
  std::vector<std::string> headers;
  library_headers(lab.labs / file, lab.tests, seen, headers);
  if (headers.empty()) return "";
  std::string list = "common/include/gpulab/" + headers.front();
  for (std::size_t i = 1; i < headers.size(); ++i) list += (i + 1 == headers.size() ? " and " : ", ") + headers[i];
  return " The library calls " + file + " can make are declared in " + list + ".";
}

}  // namespace

int hint(const Paths& paths, const std::string& lab_arg, const std::string& todo_arg, int level, bool reset) {
  // Both `hint 06 2` and `hint 06.2` (the TODO's own name, as the lessons and the skeletons write it).
  std::string lab_name = lab_arg, todo = todo_arg;
  if (const std::size_t dot = lab_arg.find('.'); dot != std::string::npos && todo.empty()) {
    lab_name = lab_arg.substr(0, dot);
    todo = lab_arg.substr(dot + 1);
  }
  const auto lab = find_lab(paths, lab_name);
  if (!lab) {
    std::cout << "gpulab hint: no lab \"" << lab_name << "\"\n";
    return 1;
  }
  // The TODOs, with their titles, from the reference's regions (titles only: never the code).
  std::vector<Region> regions;
  std::map<std::string, std::string> file_of;  // TODO id → the lab file that holds it
  for (const std::string& f : lab->sources) {
    for (Region& r : parse_regions(read_text(lab->solutions / f), (lab->solutions / f).string(), lab->number)) {
      file_of[r.id] = f;
      regions.push_back(r);
    }
  }
  // In TODO order (02.2 before 02.10), not file order.
  auto minor = [](const Region& r) { return std::stoi(r.id.substr(r.id.find('.') + 1)); };
  std::sort(regions.begin(), regions.end(), [&](const Region& a, const Region& b) { return minor(a) < minor(b); });
  auto ladder_of = [&](const Region& r) {
    const auto it = lab->todo_hints.find(r.id);
    // The lesson poses the problem first; the lab's rungs then go from a nudge to the whole recipe.
    std::vector<std::string> steps = {"Read lessons/" + lab->slug + ".md, section \"TODO(" + r.id +
                                      ")\": what this TODO must achieve and why; the contract is in the header beside the tests (tests/" +
                                      lab->slug + "/)." + library_note(*lab, file_of[r.id])};
    if (it != lab->todo_hints.end()) steps.insert(steps.end(), it->second.begin(), it->second.end());
    return steps;
  };
  if (todo.empty()) {
    std::cout << "Lab " << lab->number << " — " << lab->title << ": hints per TODO (./gpulab hint " << lab->number << " <k>)\n";
    for (const Region& r : regions) std::cout << "  " << r.id << "  " << r.title << "  (" << ladder_of(r).size() << " hints)\n";
    return 0;
  }
  const std::string id = todo.find('.') == std::string::npos ? lab->number + "." + todo : todo;
  const auto it = std::find_if(regions.begin(), regions.end(), [&](const Region& r) { return r.id == id; });
  if (it == regions.end()) {
    std::cout << "gpulab hint: lab " << lab->number << " has no TODO(" << id << ")\n";
    return 1;
  }
  const std::vector<std::string> steps = ladder_of(*it);
  const fs::path seen_file = paths.state_dir() / "hints.json";
  nlohmann::json seen = fs::exists(seen_file) ? nlohmann::json::parse(read_text(seen_file), nullptr, false) : nlohmann::json::object();
  if (!seen.is_object()) seen = nlohmann::json::object();
  if (reset) seen.erase(id);
  const int show = std::min<int>(level > 0 ? level : seen.value(id, 0) + 1, static_cast<int>(steps.size()));
  std::cout << "TODO(" << id << "): " << it->title << "\n";
  for (int k = 1; k <= show; ++k) std::cout << "  hint " << k << "/" << steps.size() << ": " << steps[static_cast<std::size_t>(k - 1)] << "\n";
  if (show < static_cast<int>(steps.size())) std::cout << "  (run it again for the next hint)\n";
  if (level <= 0) {
    seen[id] = show;
    write_text(seen_file, seen.dump(2) + "\n");
  }
  return 0;
}

}  // namespace gpulab::cli
