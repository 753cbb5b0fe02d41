/// @file sync.cpp
/// @brief Skeleton generation with a manifest that protects the learner's files.
#include "author/sync.hpp"

#include <chrono>
#include <sstream>

#include "base/regions.hpp"

namespace gpulab::cli {
namespace {

fs::path manifest_path(const Paths& paths) { return paths.root / "labs" / ".sync-manifest.json"; }

nlohmann::json load_manifest(const Paths& paths) {
  const fs::path p = manifest_path(paths);
  if (!fs::exists(p)) return nlohmann::json::object();
  return nlohmann::json::parse(read_text(p));
}

std::string first_difference(const std::string& have, const std::string& want) {
  std::istringstream a(have), b(want);
  std::string la, lb;
  for (std::size_t line = 1;; ++line) {
    const bool ga = static_cast<bool>(std::getline(a, la));
    const bool gb = static_cast<bool>(std::getline(b, lb));
    if (!ga && !gb) return "identical";
    if (ga != gb || la != lb) {
      return "line " + std::to_string(line) + ": labs/ has \"" + (ga ? la : "<end of file>") +
             "\", sync would write \"" + (gb ? lb : "<end of file>") + "\"";
    }
  }
}

}  // namespace

SyncReport sync_labs(const Paths& paths, const std::vector<LabConfig>& labs, bool check, bool force) {
  SyncReport report;
  nlohmann::json manifest = load_manifest(paths);
  nlohmann::json new_manifest = nlohmann::json::object();
  for (const LabConfig& lab : labs) {
    for (const std::string& file : lab.sources) {
      const std::string key = lab.slug + "/" + file;
      const fs::path source = lab.solutions / file;
      const fs::path target = lab.labs / file;
      const std::string rendered = render(read_text(source), source.string(), lab.slug);
      const std::string rendered_hash = content_hash(rendered);
      new_manifest[key] = rendered_hash;
      const bool exists = fs::exists(target);
      const std::string current = exists ? read_text(target) : std::string();
      if (check) {
        if (!exists) {
          report.drift.push_back(key + ": missing from labs/");
        } else if (current != rendered) {
          report.drift.push_back(key + ": " + first_difference(current, rendered));
        } else if (manifest.value(key, "") != rendered_hash) {
          report.drift.push_back(key + ": labs/.sync-manifest.json is out of date");
        } else {
          report.unchanged.push_back(key);
        }
        continue;
      }
      if (exists && current == rendered) {
        report.unchanged.push_back(key);
        continue;
      }
      const bool untouched = !exists || manifest.value(key, "") == content_hash(current);
      if (!untouched) {
        if (!force) {
          report.refused.push_back(key);
          new_manifest[key] = manifest.value(key, "");
          continue;
        }
        const auto stamp = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch()).count();
        const fs::path backup = target.string() + ".bak-" + std::to_string(stamp);
        fs::copy_file(target, backup);
        report.backed_up.push_back(backup.string());
      }
      write_text(target, rendered);
      report.written.push_back(key);
    }
  }
  if (!check) write_text(manifest_path(paths), new_manifest.dump(2) + "\n");
  return report;
}

std::vector<std::string> learner_changes(const Paths& paths, const std::vector<LabConfig>& labs) {
  std::vector<std::string> changed;
  const nlohmann::json manifest = load_manifest(paths);
  for (const LabConfig& lab : labs) {
    for (const std::string& file : lab.sources) {
      const std::string key = lab.slug + "/" + file;
      const fs::path target = lab.labs / file;
      if (!fs::exists(target) || manifest.value(key, "") != content_hash(read_text(target))) {
        changed.push_back(key);
      }
    }
  }
  return changed;
}

std::vector<std::string> lesson_gaps(const LabConfig& lab) {
  std::vector<std::string> gaps;
  const std::string lesson = fs::exists(lab.lesson) ? read_text(lab.lesson) : std::string();
  for (const std::string& file : lab.sources) {
    const fs::path source = lab.solutions / file;
    for (const Region& r : parse_regions(read_text(source), source.string(), lab.number)) {
      // A section: a heading line that starts with the TODO's name ("### TODO(04.8): ..."), not
      // a mention of it in a paragraph.
      const std::string heading = " TODO(" + r.id + ")";
      bool found = false;
      for (std::size_t at = lesson.find(heading); at != std::string::npos && !found; at = lesson.find(heading, at + 1)) {
        const std::size_t line = lesson.rfind('\n', at) == std::string::npos ? 0 : lesson.rfind('\n', at) + 1;
        found = at > line && lesson.find_first_not_of('#', line) == at && at - line >= 2;
      }
      if (!found) gaps.push_back(r.id + " (no \"### TODO(" + r.id + ")\" heading in lessons/" + lab.slug + ".md)");
    }
  }
  return gaps;
}

}  // namespace gpulab::cli
