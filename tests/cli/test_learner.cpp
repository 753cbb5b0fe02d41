/// @file test_learner.cpp
/// @brief Progress records and hint ladders, on a throwaway source tree.
#include <catch2/catch.hpp>

#include "learner/hints.hpp"
#include "learner/progress.hpp"
#include "temp_tree.hpp"

namespace fs = std::filesystem;
using namespace gpulab::cli;
using gpulab::testing::captured;
using gpulab::testing::TempTree;

namespace {
Check check(const std::string& name, Status status, Where where = Where::kCpu) {
  Check c;
  c.name = name;
  c.status = status;
  c.where = where;
  return c;
}
const char* kHints = R"({"title": "X", "sources": ["a.cu"], "build": {"tests": ["test_x.cpp"]}, "todo_hints": {"05.1": ["first step", "second step"]}})";
}  // namespace

TEST_CASE("progress is recorded per lab and summarised", "[cpu]") {
  TempTree t("progress");
  CHECK(progress_line(load_progress(t.paths), "05") == "not graded yet");
  GradeResult r;
  std::ostringstream quiet;
  r.card = Scorecard(false, &quiet);
  r.card.add(check("compile", Status::kPass, Where::kNone));
  r.card.add(check("a case", Status::kFail));
  r.card.add(check("a gpu case", Status::kNotRun, Where::kGpu));
  r.exit_code = r.card.exit_code();
  record_progress(t.paths, r, "05");
  CHECK(fs::exists(t.paths.root / ".gpulab/progress.json"));  // never among the sources
  CHECK(progress_line(load_progress(t.paths), "05").find("1 of 3 checks pass") != std::string::npos);
  CHECK(load_progress(t.paths)["05"]["first_failure"] == "a case");
  r.card = Scorecard(false, &quiet);
  r.card.add(check("compile", Status::kPass, Where::kNone));
  r.card.add(check("a case", Status::kPass));
  r.card.add(check("a gpu case", Status::kEmuPass, Where::kGpu));
  record_progress(t.paths, r, "05");
  CHECK(progress_line(load_progress(t.paths), "05").find("1 checks need a GPU") != std::string::npos);
  CHECK(load_progress(t.paths)["05"]["emulated_ok"] == 1);
  // An entry written by anything but the grader (here: by hand) reads as such.
  nlohmann::json forged = nlohmann::json::parse(t.read(".gpulab/progress.json"));
  forged["05"]["failed"] = 0;
  forged["05"]["not_run"] = 0;
  t.write(".gpulab/progress.json", forged.dump());
  CHECK(progress_line(load_progress(t.paths), "05") == "not graded yet (its record was changed outside the grader)");
}

TEST_CASE("a lab in parts records each part from its own checks and a copied entry reads as changed", "[cpu]") {
  TempTree t("parts");
  std::ostringstream quiet;
  GradeResult whole;
  whole.card = Scorecard(false, &quiet);
  whole.card.add(check("compile", Status::kPass, Where::kNone));  // shared: counts in both parts
  Check one = check("formats", Status::kPass), two = check("hgemm", Status::kFail), stray = check("no part", Status::kPass);
  one.data["part"] = 1;
  two.data["part"] = 2;
  stray.data["part"] = 0;  // a case no part's test files hold: it counts against every part
  whole.card.add(one);
  whole.card.add(two);
  whole.card.add(stray);
  record_progress(t.paths, whole, "04", 0, 2);
  const nlohmann::json p = load_progress(t.paths);
  CHECK(progress_line(p, "04/1").rfind("complete", 0) == 0);
  CHECK(progress_line(p, "04/2").find("2 of 3 checks pass") != std::string::npos);
  CHECK(progress_line(p, "04", 2).find("part 1: complete") == 0);
  CHECK(progress_line(p, "04", 2).find("; part 2: in progress: 2 of 3") != std::string::npos);
  // Part 2 graded alone (--part 2) replaces part 2's entry only.
  GradeResult part;
  part.card = Scorecard(false, &quiet);
  part.card.add(check("compile", Status::kPass, Where::kNone));
  part.card.add(check("hgemm", Status::kPass));
  record_progress(t.paths, part, "04", 2, 2);
  CHECK(progress_line(load_progress(t.paths), "04", 2).find("part 2: complete") != std::string::npos);
  nlohmann::json copied = nlohmann::json::parse(t.read(".gpulab/progress.json"));
  copied["04/1"] = copied["04/2"];
  t.write(".gpulab/progress.json", copied.dump());
  CHECK(progress_line(load_progress(t.paths), "04/1") == "not graded yet (its record was changed outside the grader)");
}

TEST_CASE("hints come one at a time from the lesson to the recipe and take hint 05 1 or hint 05.1", "[cpu]") {
  TempTree t("hints", kHints);
  const std::string list = captured([&] { hint(t.paths, "05", "", 0, false); });
  CHECK(list.find("05.1  Return one  (3 hints)") != std::string::npos);
  CHECK(list.find("05.2  Return two  (1 hints)") != std::string::npos);
  CHECK(list.find("return 1") == std::string::npos);  // titles only, never the solution
  const std::string first = captured([&] { hint(t.paths, "05", "1", 0, false); });
  CHECK(first.find("hint 1/3: Read lessons/05-x.md, section \"TODO(05.1)\"") != std::string::npos);
  CHECK(first.find("first step") == std::string::npos);
  const std::string second = captured([&] { hint(t.paths, "05", "05.1", 0, false); });
  CHECK(second.find("hint 2/3: first step") != std::string::npos);
  const std::string third = captured([&] { hint(t.paths, "05.1", "", 0, false); });  // the TODO's own name, as lessons write it
  CHECK(third.find("hint 3/3: second step") != std::string::npos);
  const std::string again = captured([&] { hint(t.paths, "05", "1", 0, true); });
  CHECK(again.find("hint 2/3") == std::string::npos);  // --reset starts over
  const std::string other = captured([&] { hint(t.paths, "05.2", "", 0, false); });
  CHECK(other.find("TODO(05.2): Return two") != std::string::npos);
  CHECK(hint(t.paths, "05", "9", 0, false) == 1);
}
