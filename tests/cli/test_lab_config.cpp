/// @file test_lab_config.cpp
/// @brief lab.json is checked with clear errors; the case list and stretch goals; CTest's JUnit.
#include <catch2/catch.hpp>

#include "author/junit.hpp"
#include "base/lab_config.hpp"
#include "grade/cases.hpp"
#include "temp_tree.hpp"

using namespace gpulab::cli;
using gpulab::testing::TempTree;

namespace {
std::string error_of(const std::string& text) {
  try {
    parse_lab_json(text, "lab.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("lab.json with an unknown key or a wrong type or a bad threshold is refused with its name", "[cpu]") {
  CHECK(error_of(R"({"title": "X", "sources": ["a.cu"]})").empty());
  CHECK(error_of(R"({"title": "X", "metric": "x"})").find("unknown key \"metric\"") != std::string::npos);
  CHECK(error_of(R"({"title": "X", "timeout_s": "long"})").find("\"timeout_s\" has the wrong type") != std::string::npos);
  CHECK(error_of(R"({"title": "X", "performance": {"v2": {"min_fraction_of_reference": 60}}})").find("must be a fraction") != std::string::npos);
  CHECK(error_of(R"({"title": "X", "performance": {"v2": {"case": "v2 speed"}}})").find("performance.v2: unknown key \"case\"") != std::string::npos);
  CHECK(error_of(R"({"title": "X", "perf_ranks": [2]})").find("without \"mpi_ranks\"") != std::string::npos);
  CHECK(error_of(R"({"title": "X", "performance": {"r": {"min_fraction_of_link": 0.8}}})").find("needs \"link_gate_max_nodes\" >= 2") !=
        std::string::npos);
  CHECK(error_of(R"({"title": "X", "performance": {"r": {"min_fraction_of_link": 80, "link_gate_max_nodes": 3}}})").find("must be a fraction") !=
        std::string::npos);
  const LabConfig linked = parse_lab_json(R"({"title": "X", "performance": {"r": {"min_fraction_of_link": 0.8, "link_gate_max_nodes": 3}}})", "lab.json");
  CHECK(linked.performance.at("r").min_fraction_of_link == 0.8);
  CHECK(linked.performance.at("r").link_gate_max_nodes == 3);
  CHECK(error_of(R"({"sources": ["a.cu"]})").find("\"title\" is missing") != std::string::npos);
  CHECK(error_of("{not json").find("not valid JSON") != std::string::npos);
  const LabConfig lab = parse_lab_json(R"({"title": "X", "sources": ["a.cu"], "mpi_ranks": [2, 3]})", "lab.json");
  CHECK(lab.perf_ranks == std::vector<int>{2, 3});  // default: mpi_ranks
  CHECK(lab.distributed());
}

TEST_CASE("a lab is checked against its tree: sources present and hints naming regions that exist", "[cpu]") {
  TempTree good("config");
  REQUIRE(discover_labs(good.paths).size() == 1);
  CHECK(discover_labs(good.paths)[0].lesson == good.paths.root / "lessons/05-x.md");  // derived from the slug
  TempTree missing("config-missing", R"({"title": "X", "sources": ["a.cu", "b.cu"]})");
  CHECK_THROWS_WITH(discover_labs(missing.paths), Catch::Contains("source \"b.cu\" is not in solutions/05-x/"));
  TempTree hints("config-hints", R"({"title": "X", "sources": ["a.cu"], "todo_hints": {"05.9": ["x"]}})");
  CHECK_THROWS_WITH(discover_labs(hints.paths), Catch::Contains("todo_hints names TODO(05.9)"));
}

TEST_CASE("the case list gives tags and TODOs and the stretch goals", "[cpu]") {
  const auto cases = parse_case_list("cpu\tplan\t[cpu][03.1]\ngpu\tv6 right\t[gpu][03.6][stretch]\ngpu\tv6 speed\t[gpu][perf][03.6][stretch]\n"
                                     "gpu\tv5 right\t[gpu][03.5]\nnot a case line\n");
  REQUIRE(cases.size() == 4);
  CHECK(cases[2].perf());
  CHECK(cases[1].todos("03") == std::vector<std::string>{"03.6"});
  LabConfig lab;
  lab.number = "03";
  CHECK(stretch_todos(lab, cases) == std::vector<std::string>{"03.6"});
}

TEST_CASE("the case named by --case is the exact name or else the one case whose name holds the text ignoring case", "[cpu]") {
  const auto cases = parse_case_list("cpu\tthe bubble with 20/40 ms stages\t[cpu]\ncpu\tthe bubble with real compute\t[cpu][perf]\n"
                                     "cpu\tthe bubble\t[cpu]\ncpu\tpartition\t[cpu][any-width]\n");
  REQUIRE(cases.size() == 4);
  CHECK(cases_named(cases, "the bubble").size() == 1);  // exact wins over the two that hold it
  CHECK(cases_named(cases, "REAL compute").front().name == "the bubble with real compute");
  CHECK(cases_named(cases, "bubble with").size() == 2);  // ambiguous: the grader lists both
  CHECK(cases_named(cases, "pipeline").empty());
  CHECK(cases_named(cases, "").empty());
  CHECK(cases[3].has_tag("any-width"));
}

TEST_CASE("a stretch case reached says which TODO's work it credits and one not reached is not counted", "[cpu]") {
  // Lab 09's executor (09.4) on the tests' interleaved schedule passes while interleaved() (09.5) is empty:
  // its line must credit 09.4, not read as the stretch TODO done.
  const auto cases = parse_case_list("cpu\texecutor on the tests' schedule\t[cpu][09.4][stretch]\ncpu\tyour interleaved schedule\t[cpu][09.5][stretch]\n");
  REQUIRE(cases.size() == 2);
  Check reached;
  reached.status = Status::kPass;
  mark_stretch(cases[0], reached);
  CHECK(reached.status == Status::kPass);
  REQUIRE(reached.details.size() == 1);
  CHECK(reached.details[0] == "a stretch goal of TODO 09.4, reached");
  Check missed;
  missed.status = Status::kFail;
  mark_stretch(cases[1], missed);
  CHECK(missed.status == Status::kStretch);
  CHECK(missed.details.at(0) == "a stretch goal of TODO 09.5: not counted in the result");
}

TEST_CASE("CTest's JUnit file gives each test's outcome", "[cpu]") {
  // Recorded from CTest 3.25: a pass, a failure (with XML entities in its name), a skip (77), a time-out.
  const auto cases = parse_junit(gpulab::cli::read_text(GPULAB_TEST_DATA "/ctest-junit.xml"));
  REQUIRE(cases.size() == 4);
  CHECK(cases[0].passed());
  CHECK(cases[1].name == "b fails & <quotes> \"x\"");
  CHECK(cases[1].failed);
  CHECK(cases[2].skipped);
  CHECK_FALSE(cases[2].passed());
  CHECK(cases[3].failed);
  CHECK_THROWS(parse_junit("no results"));
}
