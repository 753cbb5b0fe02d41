/// @file test_sync.cpp
/// @brief sync writes skeletons, protects the learner's changes, and --check finds drift.
#include <catch2/catch.hpp>


#include "author/sync.hpp"
#include "temp_tree.hpp"

namespace fs = std::filesystem;
using namespace gpulab::cli;

namespace {
/// The shared throwaway tree, plus a header without regions.
struct Tree : gpulab::testing::TempTree {
  Tree() : TempTree("sync", R"({"title": "X", "sources": ["a.cu", "util.hpp"], "build": {"tests": ["test_x.cpp"]}})") { write("solutions/05-x/util.hpp", "// no regions here\n"); }
  std::vector<LabConfig> labs() const { return discover_labs(paths); }
};
}  // namespace

TEST_CASE("sync writes labs/ and --check then passes", "[cpu]") {
  Tree t;
  CHECK_FALSE(sync_labs(t.paths, t.labs(), true, false).drift.empty());  // nothing there yet
  const SyncReport r = sync_labs(t.paths, t.labs(), false, false);
  CHECK(r.written.size() == 2);
  CHECK(read_text(t.paths.root / "labs/05-x/a.cu").find("return 0;") != std::string::npos);
  CHECK(read_text(t.paths.root / "labs/05-x/util.hpp") == "// no regions here\n");
  CHECK(sync_labs(t.paths, t.labs(), true, false).drift.empty());
  CHECK(learner_changes(t.paths, t.labs()).empty());
  CHECK(lesson_gaps(t.labs()[0]).empty());
}

TEST_CASE("a solution change without re-sync is drift that re-sync fixes", "[cpu]") {
  Tree t;
  sync_labs(t.paths, t.labs(), false, false);
  t.write("solutions/05-x/a.cu", "int a() {\n  // BEGIN SOLUTION(05.1) Return uno\n  return 1;\n  // END SOLUTION\n}\n");
  const SyncReport check = sync_labs(t.paths, t.labs(), true, false);
  REQUIRE(check.drift.size() == 1);
  CHECK(check.drift[0].find("line 2") != std::string::npos);
  CHECK(sync_labs(t.paths, t.labs(), false, false).written.size() == 1);  // untouched: rewritten
  CHECK(sync_labs(t.paths, t.labs(), true, false).drift.empty());
}

TEST_CASE("sync refuses to overwrite the learner's work and --force saves it first", "[cpu]") {
  Tree t;
  sync_labs(t.paths, t.labs(), false, false);
  const fs::path mine = t.paths.root / "labs/05-x/a.cu";
  write_text(mine, "int a() { return 1; }  // my answer\n");
  t.write("solutions/05-x/a.cu", "int a() {\n  // BEGIN SOLUTION(05.1) Return 1 again\n  return 1;\n  // END SOLUTION\n}\n");
  CHECK(learner_changes(t.paths, t.labs()) == std::vector<std::string>{"05-x/a.cu"});
  const SyncReport refused = sync_labs(t.paths, t.labs(), false, false);
  CHECK(refused.refused == std::vector<std::string>{"05-x/a.cu"});
  CHECK(read_text(mine) == "int a() { return 1; }  // my answer\n");
  const SyncReport forced = sync_labs(t.paths, t.labs(), false, true);
  REQUIRE(forced.backed_up.size() == 1);
  CHECK(read_text(forced.backed_up[0]) == "int a() { return 1; }  // my answer\n");
  CHECK(read_text(mine).find("TODO(05.1)") != std::string::npos);
}

TEST_CASE("a region without a lesson section is reported", "[cpu]") {
  Tree t;
  t.write("lessons/05-x.md", "no sections\n");
  const auto gaps = lesson_gaps(t.labs()[0]);
  REQUIRE(gaps.size() == 2);
  CHECK(gaps[0].find("05.1") == 0);
  // A mention in a paragraph, or TODO(05.10)'s heading, is not TODO(05.1)'s section.
  t.write("lessons/05-x.md", "See TODO(05.1) and TODO(05.2) below.\n### TODO(05.10) Another\n### TODO(05.2): Return two\n");
  const auto mentioned = lesson_gaps(t.labs()[0]);
  REQUIRE(mentioned.size() == 1);
  CHECK(mentioned[0].find("05.1 (no") == 0);
}
