/// @file bundle.cpp
/// @brief A lab's autograder for Gradescope, or a template repository for GitHub Classroom (bundle.hpp).
#include "author/bundle.hpp"

#include <algorithm>
#include <cstring>
#include <iostream>
#include <utility>
#include <vector>

#include "base/files.hpp"
#include "base/lab_config.hpp"
#include "base/process.hpp"

namespace gpulab::cli {

namespace {

/// @p text with each "@KEY@" of @p values replaced.
std::string filled(std::string text, const std::vector<std::pair<std::string, std::string>>& values) {
  for (const auto& [key, value] : values) {
    for (std::size_t at = 0; (at = text.find(key, at)) != std::string::npos; at += value.size()) text.replace(at, key.size(), value);
  }
  return text;
}

/// "owner/name" of a GitHub remote URL (https://github.com/o/n(.git) or git@github.com:o/n(.git)), "" otherwise.
std::string github_repo(std::string url) {
  while (!url.empty() && (url.back() == '\n' || url.back() == '/')) url.pop_back();
  if (url.size() > 4 && url.compare(url.size() - 4, 4, ".git") == 0) url.resize(url.size() - 4);
  for (const char* host : {"github.com/", "github.com:"}) {
    const std::size_t at = url.find(host);
    if (at != std::string::npos) {
      const std::string repo = url.substr(at + std::strlen(host));
      if (std::count(repo.begin(), repo.end(), '/') == 1 && repo.front() != '/' && repo.back() != '/') return repo;
    }
  }
  return "";
}

/// GitHub Classroom: a template repository for the assignment (the lab's skeleton files, the
/// workflow, a README), the course pinned at HEAD.
int classroom_bundle(const Paths& paths, const BundleOptions& options, const LabConfig& lab, const fs::path& out) {
  ProcessOptions o;
  o.cwd = paths.root.string();
  std::string repo = options.course_repo;
  if (repo.empty()) repo = github_repo(run_process({"git", "remote", "get-url", "origin"}, o).output);
  if (repo.empty()) {
    std::cout << "gpulab bundle: name the course's GitHub repository with --course-repo OWNER/NAME (origin is not on GitHub)\n";
    return 2;
  }
  const ProcessResult head = run_process({"git", "rev-parse", "HEAD"}, o);
  if (!head.exited(0)) {
    std::cout << "gpulab bundle: git rev-parse HEAD failed: the bundle pins the course's commit, and needs a git checkout\n";
    return 2;
  }
  const std::string commit = head.output.substr(0, head.output.find('\n'));
  std::string sources;
  for (const std::string& f : lab.sources) {
    fs::create_directories((out / f).parent_path());
    fs::copy_file(lab.labs / f, out / f, fs::copy_options::overwrite_existing);
    sources += (sources.empty() ? "" : ", ") + f;
  }
  const std::vector<std::pair<std::string, std::string>> values = {
      {"@LAB@", lab.number}, {"@SOURCES@", sources}, {"@COURSE_REPO@", repo}, {"@COURSE_REF@", commit}};
  fs::create_directories(out / ".github" / "workflows");
  write_text(out / ".github" / "workflows" / "classroom.yml", filled(read_text(paths.root / "tools" / "classroom" / "classroom.yml"), values));
  write_text(out / "README.md", filled("# gpulab lab @LAB@\n\nYour files: @SOURCES@. The lesson is `lessons/" + lab.slug +
                                           ".md` in the course (@COURSE_REPO@). Every push is graded: the Actions tab shows the "
                                           "scorecard and your points (the CPU checks; [gpu] checks are not run on GitHub's "
                                           "machines, never passed). Grade on your own machine with the course's "
                                           "`./gpulab grade @LAB@ --submission PATH/TO/THIS/FOLDER`.\n",
                                       values));
  if (!run_process({"git", "diff", "--quiet", "HEAD"}, o).exited(0)) {
    std::cout << "gpulab bundle: note: uncommitted changes are not what the workflow checks out (it pins HEAD, " << commit << ")\n";
  }
  std::cout << "gpulab bundle " << lab.number << " --for classroom: " << out.string() << " (" << sources << ", .github/workflows/classroom.yml, README.md)\n"
            << "  push it as the assignment's template repository; the workflow grades with " << repo << " at " << commit.substr(0, 12)
            << " (that commit must be pushed there)\n"
            << "  students can edit the workflow: its score is feedback; grade for the record with `gpulab grade-class` or Gradescope\n";
  return 0;
}

int gradescope_bundle(const Paths& paths, const LabConfig& lab, const fs::path& out) {
  for (const char* name : {"setup.sh", "run_autograder"}) {
    write_text(out / name, filled(read_text(paths.root / "tools" / "gradescope" / name), {{"@LAB@", lab.number}, {"@FIRST_SOURCE@", lab.sources.front()}}));
    fs::permissions(out / name, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  }
  ProcessOptions o;
  o.cwd = paths.root.string();
  const ProcessResult archive = run_process({"git", "archive", "--format=tar.gz", "-o", (out / "course.tar.gz").string(), "HEAD"}, o);
  if (!archive.exited(0)) {
    std::cout << "gpulab bundle: git archive failed (" << archive.describe() << "): the bundle needs the course as a git checkout\n" << archive.output;
    return 2;
  }
  if (!run_process({"git", "diff", "--quiet", "HEAD"}, o).exited(0)) {
    std::cout << "gpulab bundle: note: uncommitted changes are not in the bundle (it packs HEAD)\n";
  }
  const ProcessResult zip = run_process({"zip", "-q", "-j", (out / "autograder.zip").string(), (out / "setup.sh").string(), (out / "run_autograder").string(),
                                         (out / "course.tar.gz").string()});
  std::cout << "gpulab bundle " << lab.number << " --for gradescope: " << out.string() << "/{setup.sh, run_autograder, course.tar.gz}\n"
            << (zip.exited(0) ? "  upload " + (out / "autograder.zip").string() + " as the assignment's autograder\n"
                              : "  zip those three files (no folder) and upload the zip as the assignment's autograder (`zip` is not installed here)\n")
            << "  the image needs the CUDA toolkit for the GPU labs (setup.sh says how); [gpu] checks are reported as not run there, never passed\n";
  return 0;
}

}  // namespace

int make_bundle(const Paths& paths, const BundleOptions& options) {
  const std::optional<LabConfig> lab = find_lab(paths, options.lab);
  if (!lab) {
    std::cout << "gpulab bundle: no lab \"" << options.lab << "\"\n";
    return 2;
  }
  const fs::path out = fs::absolute(options.out.empty() ? paths.build / "bundle" / (lab->slug + "-" + options.platform) : fs::path(options.out));
  if (fs::exists(out) && !fs::is_empty(out)) {
    std::cout << "gpulab bundle: " << out.string() << " is not empty (remove it first)\n";
    return 2;
  }
  fs::create_directories(out);
  return options.platform == "classroom" ? classroom_bundle(paths, options, *lab, out) : gradescope_bundle(paths, *lab, out);
}

}  // namespace gpulab::cli
