/// @file test_bundle.cpp
/// @brief `gpulab bundle`: the Gradescope autograder and the GitHub Classroom template repository,
/// written from a throwaway course under git, every placeholder filled.
#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include "author/bundle.hpp"
#include "base/process.hpp"
#include "temp_tree.hpp"

namespace fs = std::filesystem;
using gpulab::cli::BundleOptions;
using gpulab::cli::make_bundle;
using gpulab::cli::run_process;

namespace {

/// A course under git: lab 05-x with its skeleton, the real bundle templates, one commit, and
/// @p origin as its remote.
struct Course : gpulab::testing::TempTree {
  std::string commit;
  /// @p name keeps two courses of one test apart.
  Course(const std::string& origin, const std::string& name) : TempTree(name) {
    write("labs/05-x/a.cu", "int a() {\n  return 0;\n}\n");
    const fs::path tools = fs::path(GPULAB_CLI_SOURCES).parent_path();
    for (const char* t : {"classroom/classroom.yml", "gradescope/setup.sh", "gradescope/run_autograder"}) write(std::string("tools/") + t, gpulab::cli::read_text(tools / t));
    gpulab::cli::ProcessOptions o;
    o.cwd = paths.root.string();
    for (const std::vector<std::string>& git : {std::vector<std::string>{"git", "init", "-q"}, {"git", "add", "-A"},
                                                {"git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "course"},
                                                {"git", "remote", "add", "origin", origin}}) {
      REQUIRE(run_process(git, o).exited(0));
    }
    const auto head = run_process({"git", "rev-parse", "HEAD"}, o);
    commit = head.output.substr(0, head.output.find('\n'));
  }
};

/// Every "@NAME@" left in @p text.
std::string placeholders(const std::string& text) {
  std::string left;
  const std::regex key("@[A-Z_]+@");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), key); it != std::sregex_iterator(); ++it) left += it->str() + " ";
  return left;
}

}  // namespace

TEST_CASE("bundle for classroom writes the lab's files and a workflow pinned to the course's repository and commit", "[cpu]") {
  Course c("git@github.com:a-university/gpu-course.git", "bundle-classroom");
  BundleOptions o;
  o.lab = "05";
  o.platform = "classroom";
  o.out = (c.paths.root / "out").string();
  int rc = -1;
  const std::string said = gpulab::testing::captured([&] { rc = make_bundle(c.paths, o); });
  INFO(said);
  REQUIRE(rc == 0);
  CHECK(c.read("out/a.cu") == "int a() {\n  return 0;\n}\n");
  const std::string workflow = c.read("out/.github/workflows/classroom.yml");
  CHECK(placeholders(workflow).empty());
  CHECK(workflow.find("repository: a-university/gpu-course\n") != std::string::npos);
  CHECK(workflow.find("ref: " + c.commit + "\n") != std::string::npos);
  CHECK(workflow.find("./gpulab grade 05 --submission") != std::string::npos);
  CHECK(workflow.find("--format classroom") != std::string::npos);
  CHECK(workflow.find("runners: gpulab") != std::string::npos);
  CHECK(placeholders(c.read("out/README.md")).empty());
  // A second bundle into the same folder is refused; a course off GitHub needs --course-repo.
  CHECK(gpulab::testing::captured([&] { rc = make_bundle(c.paths, o); }).find("is not empty") != std::string::npos);
  CHECK(rc == 2);
  Course elsewhere("https://gitlab.example.org/course.git", "bundle-elsewhere");
  o.out = (elsewhere.paths.root / "out").string();
  CHECK(gpulab::testing::captured([&] { rc = make_bundle(elsewhere.paths, o); }).find("--course-repo") != std::string::npos);
  CHECK(rc == 2);
  o.course_repo = "a-university/gpu-course";
  CHECK(gpulab::testing::captured([&] { rc = make_bundle(elsewhere.paths, o); }).find("--for classroom") != std::string::npos);
  CHECK(rc == 0);
}

TEST_CASE("bundle for gradescope writes setup.sh and run_autograder for the lab and the course at HEAD", "[cpu]") {
  Course c("https://github.com/a-university/gpu-course", "bundle-gradescope");
  BundleOptions o;
  o.lab = "05";
  o.out = (c.paths.root / "out").string();
  int rc = -1;
  const std::string said = gpulab::testing::captured([&] { rc = make_bundle(c.paths, o); });
  INFO(said);
  REQUIRE(rc == 0);
  for (const char* f : {"out/setup.sh", "out/run_autograder"}) {
    const std::string text = c.read(f);
    CHECK(placeholders(text).empty());
    CHECK(text.find(" 05 ") != std::string::npos);
    CHECK((fs::status(c.paths.root / f).permissions() & fs::perms::owner_exec) != fs::perms::none);
  }
  CHECK(c.read("out/run_autograder").find("\"$submission/a.cu\"") != std::string::npos);
  const auto listing = run_process({"tar", "-tzf", (c.paths.root / "out/course.tar.gz").string()});
  REQUIRE(listing.exited(0));
  CHECK(listing.output.find("labs/05-x/a.cu") != std::string::npos);
  CHECK(listing.output.find("out/") == std::string::npos);  // HEAD, not the working tree
}
