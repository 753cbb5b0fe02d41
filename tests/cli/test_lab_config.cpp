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

TEST_CASE("lab.json's build (what CMake makes of the lab) is refused with the key that is wrong", "[cpu]") {
  const std::string head = R"({"title": "X", "sources": ["a.cu", "b.cpp"], )";
  const LabConfig lab = parse_lab_json(head + R"("build": {"tests": ["test_a.cpp", "test_b.cpp"], "libraries": ["CUDA::cublas"],
      "emulator": {"sources": ["a.cu"], "tests": ["test_a.cpp"]}, "assemble_for": ["90a-real"]}})", "lab.json");
  CHECK(lab.targets.tests == std::vector<std::string>{"test_a.cpp", "test_b.cpp"});
  CHECK(lab.targets.main == "cuda");  // the default
  CHECK(lab.targets.emulator);
  CHECK(lab.targets.emu_sources == std::vector<std::string>{"a.cu"});
  CHECK(parse_lab_json(head + R"("build": {"tests": ["t.cpp"], "emulator": true}})", "lab.json").targets.emu_sources.empty());
  CHECK_FALSE(parse_lab_json(head + R"("build": {"tests": ["t.cpp"]}})", "lab.json").targets.emulator);
  CHECK(error_of(head + R"("build": {"libraries": ["cublas"]}})").find("build: \"tests\" is missing") != std::string::npos);
  CHECK(error_of(head + R"("build": {"tests": ["t.cpp"], "libraries": ["cublas"]}})").find("\"libraries\" holds \"cublas\", which is not one of CUDA::cublas") != std::string::npos);
  CHECK(error_of(head + R"("build": {"tests": ["t.cpp"], "main": "mpi"}})").find("\"main\" is \"mpi\" but the lab has no \"mpi_ranks\"") != std::string::npos);
  CHECK(error_of(head + R"("mpi_ranks": [2], "build": {"tests": ["t.cpp"]}})").find("\"main\" is \"cuda\" but the lab has \"mpi_ranks\"") != std::string::npos);
  CHECK(error_of(head + R"("mpi_ranks": [2], "build": {"tests": ["t.cpp"], "main": "mpi", "emulator": true}})").find("\"emulator\" is for kernel labs") != std::string::npos);
  CHECK(error_of(head + R"("build": {"tests": ["t.cpp"], "emulator": {"sources": ["c.cu"]}}})").find("\"emulator.sources\" holds \"c.cu\"") != std::string::npos);
  CHECK(error_of(head + R"("build": {"tests": ["../t.cpp"]}})").find("\"tests\" holds \"../t.cpp\"") != std::string::npos);
  CHECK(error_of(head + R"("build": {"tests": ["t.cpp"], "assemble_for": ["sm_90"]}})").find("\"assemble_for\" holds \"sm_90\"") != std::string::npos);
  CHECK(error_of(head + R"("build": {"tests": ["t.cpp"], "mains": "x"}})").find("build: unknown key \"mains\"") != std::string::npos);
  // The lab's part of the GPU proof (scripts/gpu-check).
  const LabConfig gpu = parse_lab_json(head + R"("gpu_check": {"risk": 2, "sass": true, "grades": [{"name": "ipc", "env": {"B": "cuda-ipc"},
      "repeat": 2, "args": ["--ranks", "2"]}]}})", "lab.json");
  CHECK(gpu.gpu_check.risk == 2);
  REQUIRE(gpu.gpu_check.grades.size() == 1);
  CHECK(gpu.gpu_check.grades[0].env.at("B") == "cuda-ipc");
  CHECK(gpu.gpu_check.grades[0].repeat == 2);
  CHECK(error_of(head + R"("gpu_check": {"grades": [{"name": "a b"}]}})").find("gpu_check grades[1]: \"name\" is a file name") != std::string::npos);
  CHECK(error_of(head + R"("gpu_check": {"grades": [{"name": "a", "repeat": 0}]}})").find("\"repeat\" is 1 to 10") != std::string::npos);
  CHECK(error_of(head + R"("gpu_check": {"order": 1}})").find("gpu_check: unknown key \"order\"") != std::string::npos);
  CHECK(error_of(head + R"("gpu_check": {"grades": [{"name": "a", "env": {"B": "x y"}}]}})").find("\"env\" holds B=x y") != std::string::npos);
  // What CMake reads must be plain: no quote, semicolon or dollar in a file name.
  CHECK(error_of(R"({"title": "X", "sources": ["a;b.cu"], "build": {"tests": ["t.cpp"]}})").find("is not a plain file name") != std::string::npos);
  CHECK(error_of(head + R"("build": {"tests": ["t$x.cpp"]}})").find("\"tests\" holds \"t$x.cpp\"") != std::string::npos);
  CHECK(error_of(head + R"("build": {"tests": ["t.cpp"], "assemble_for": ["100a-real"]}})").empty());
  CHECK(error_of(R"({"title": "X", "sources": ["b.cpp"], "build": {"tests": ["t.cpp"], "assemble_for": ["90a-real"]}})").find("has none") !=
        std::string::npos);
}

TEST_CASE("a lab is checked against its tree: sources present and hints naming regions that exist", "[cpu]") {
  TempTree good("config");
  REQUIRE(discover_labs(good.paths).size() == 1);
  CHECK(discover_labs(good.paths)[0].lesson == good.paths.root / "lessons/05-x.md");  // derived from the slug
  TempTree missing("config-missing", R"({"title": "X", "sources": ["a.cu", "b.cu"]})");
  CHECK_THROWS_WITH(discover_labs(missing.paths), Catch::Contains("source \"b.cu\" is not in solutions/05-x/"));
  TempTree hints("config-hints", R"({"title": "X", "sources": ["a.cu"], "todo_hints": {"05.9": ["x"]}})");
  CHECK_THROWS_WITH(discover_labs(hints.paths), Catch::Contains("todo_hints names TODO(05.9)"));
  TempTree no_build("config-no-build", R"({"title": "X", "sources": ["a.cu"]})");
  CHECK_THROWS_WITH(discover_labs(no_build.paths), Catch::Contains("\"build\" is missing"));
  TempTree no_test("config-no-test", R"({"title": "X", "sources": ["a.cu"], "build": {"tests": ["test_y.cpp"]}})");
  CHECK_THROWS_WITH(discover_labs(no_test.paths), Catch::Contains("\"build.tests\" names \"test_y.cpp\", which tests/05-x/ does not have"));
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
