/// @file test_learner.cpp
/// @brief Progress records and hint ladders, on a throwaway source tree.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <functional>
#include <sstream>

#include "learner.hpp"

namespace fs = std::filesystem;
using namespace gpulab::cli;

namespace {
struct Tree {
  Paths paths;
  Tree() {
    paths.root = fs::temp_directory_path() / ("gpulab-learner-test-" + std::to_string(::getpid()));
    paths.build = paths.root / "build";
    fs::remove_all(paths.root);
    write_text(paths.root / "solutions/05-x/a.cu",
               "// BEGIN SOLUTION(05.1) Return one\nint a() { return 1; }\n// END SOLUTION\n"
               "// BEGIN SOLUTION(05.2) Return two\nint b() { return 2; }\n// END SOLUTION\n");
    write_text(paths.root / "tests/05-x/lab.json",
               R"({"title": "X", "todo_hints": {"05.1": ["first step", "second step"]}})");
  }
  ~Tree() { fs::remove_all(paths.root); }
};

std::string captured(const std::function<void()>& run) {
  std::ostringstream out;
  std::streambuf* old = std::cout.rdbuf(out.rdbuf());
  run();
  std::cout.rdbuf(old);
  return out.str();
}
}  // namespace

TEST_CASE("progress is recorded per lab and summarised", "[cpu]") {
  Tree t;
  CHECK(progress_line(load_progress(t.paths), "05") == "not graded yet");
  GradeResult r;
  r.exit_code = 1;
  r.checks = {{"compile", "build", "", "pass", 0, {}, {}, {}}, {"a case", "correctness", "cpu", "fail", 0, {}, {}, {}},
              {"a gpu case", "correctness", "gpu", "not-run", 0, {}, {}, {}}};
  record_progress(t.paths, r, "05");
  CHECK(fs::exists(t.paths.root / ".gpulab/progress.json"));  // never among the sources
  CHECK(progress_line(load_progress(t.paths), "05").find("1 of 3 checks pass") != std::string::npos);
  CHECK(load_progress(t.paths)["05"]["first_failure"] == "a case");
  r.checks[1].status = "pass";
  record_progress(t.paths, r, "05");
  CHECK(progress_line(load_progress(t.paths), "05").find("1 checks need a GPU") != std::string::npos);
}

TEST_CASE("hints come one at a time and end at the lesson", "[cpu]") {
  Tree t;
  const std::string list = captured([&] { hint(t.paths, "05", "", 0, false); });
  CHECK(list.find("05.1  Return one  (3 hints)") != std::string::npos);
  CHECK(list.find("05.2  Return two  (1 hints)") != std::string::npos);
  CHECK(list.find("return 1") == std::string::npos);  // titles only, never the solution
  const std::string first = captured([&] { hint(t.paths, "05", "1", 0, false); });
  CHECK(first.find("hint 1/3: first step") != std::string::npos);
  CHECK(first.find("second step") == std::string::npos);
  const std::string second = captured([&] { hint(t.paths, "05", "05.1", 0, false); });
  CHECK(second.find("hint 2/3: second step") != std::string::npos);
  const std::string third = captured([&] { hint(t.paths, "05", "1", 0, false); });
  CHECK(third.find("hint 3/3: Read lessons/05-x.md, section \"TODO(05.1)\"") != std::string::npos);
  const std::string again = captured([&] { hint(t.paths, "05", "1", 0, true); });
  CHECK(again.find("hint 2/3") == std::string::npos);  // --reset starts over
  CHECK(hint(t.paths, "05", "9", 0, false) == 1);
}
