/// @file test_points.cpp
/// @brief Points from a scorecard under lab.json's rule, Gradescope's results.json (its fields
/// checked against the autograder specification's types and values) and JUnit XML (read back by
/// the same parser selftest uses for CTest's files).
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "author/junit.hpp"
#include "base/lab_config.hpp"
#include "grade/points.hpp"

using gpulab::cli::Points;
using json = nlohmann::json;

namespace {

json check(const std::string& name, const std::string& kind, const std::string& status, json data = json::object()) {
  return {{"name", name}, {"kind", kind}, {"status", status}, {"where", "cpu"}, {"seconds", 0.5}, {"details", {"a detail"}}, {"hints", json::array()},
          {"data", data}};
}

/// A learner's scorecard: a build line, correctness at two widths (one failed), a GPU case not run,
/// a stretch goal, a slow performance check at 45 % of the reference (threshold 60 %), a passing one.
json scorecard(bool forged = false) {
  json checks = {check("compile", "build", "pass"),
                 check("sums are exact (W=1)", "correctness", "pass"),
                 check("sums are exact (W=2)", "correctness", "fail"),
                 check("the kernel is right", "correctness", "not-run"),
                 check("the kernel's logic", "correctness", "emu-fail"),
                 check("a stretch rung", "performance", "stretch"),
                 check("step time", "performance", "fail", {{"threshold", 0.6}, {"learner_fraction", 0.27}, {"reference_fraction", 0.6}, {"learner_value", 12.0}, {"unit", "steps/s"}}),
                 check("bandwidth", "performance", "pass", {{"threshold", 0.5}, {"learner_fraction", 0.9}, {"reference_fraction", 1.0}, {"learner_value", 4.2}, {"unit", "GB/s"}}),
                 check("the grader's files are unchanged", "integrity", forged ? "fail" : "pass")};
  return {{"lab", "08-data-parallel"}, {"checks", checks}, {"not_run_reason", "no GPU"}, {"summary", {{"passed", 4}, {"failed", 2}, {"not_run", 1}}}};
}

const gpulab::cli::ScoredCheck& named(const gpulab::cli::PointsResult& r, const std::string& name) {
  for (const auto& c : r.checks) {
    if (c.name == name) return c;
  }
  FAIL("no scored check " << name);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("points: passes earn theirs and a slow check earns linearly above the floor and what did not run earns nothing", "[cpu]") {
  const auto r = gpulab::cli::score_scorecard(scorecard(), Points{});
  // 4 correctness lines × 1 + 2 performance lines × 2; the stretch and build lines carry none.
  CHECK(r.max_score == Approx(8.0));
  CHECK(named(r, "the kernel's logic").score == 0.0);
  // 45 % of the reference against 60 % (floor 30 %): (0.45 − 0.30) / (0.60 − 0.30) of 2 points = 1.
  CHECK(named(r, "step time").score == Approx(1.0));
  CHECK(named(r, "bandwidth").score == Approx(2.0));
  CHECK(named(r, "sums are exact (W=2)").score == 0.0);
  CHECK(named(r, "the kernel is right").score == 0.0);
  CHECK(named(r, "the kernel is right").output.find("NOT RUN on this machine (no GPU)") != std::string::npos);
  CHECK(r.score == Approx(1.0 + 1.0 + 2.0));
  CHECK_FALSE(r.integrity_failed);
}

TEST_CASE("points: a failed integrity check makes every check earn nothing", "[cpu]") {
  const auto r = gpulab::cli::score_scorecard(scorecard(true), Points{});
  CHECK(r.integrity_failed);
  CHECK(r.score == 0.0);
  CHECK(r.max_score == Approx(8.0));
  const json gs = gpulab::cli::gradescope_results(scorecard(true), r, 3.0);
  CHECK(gs["leaderboard"].empty());
  CHECK(gs["output"].get<std::string>().find("integrity") != std::string::npos);
}

TEST_CASE("points: lab.json overrides a case at every width and its errors are named", "[cpu]") {
  const Points rule = gpulab::cli::parse_points(json::parse(R"({"correctness": 2, "visibility": "after_due_date",
      "cases": {"sums are exact": {"points": 5, "visibility": "hidden"}}})"), "lab.json points");
  const auto r = gpulab::cli::score_scorecard(scorecard(), rule);
  CHECK(named(r, "sums are exact (W=1)").max_score == 5.0);
  CHECK(named(r, "sums are exact (W=2)").visibility == "hidden");
  CHECK(named(r, "the kernel is right").max_score == 2.0);
  CHECK(named(r, "the kernel is right").visibility == "after_due_date");
  using gpulab::cli::ConfigError;
  CHECK_THROWS_AS(gpulab::cli::parse_points(json::parse(R"({"visibility": "sometimes"})"), "p"), ConfigError);
  CHECK_THROWS_AS(gpulab::cli::parse_points(json::parse(R"({"correctness": -1})"), "p"), ConfigError);
  CHECK_THROWS_AS(gpulab::cli::parse_points(json::parse(R"({"performance_floor": 1})"), "p"), ConfigError);
  CHECK_THROWS_AS(gpulab::cli::parse_points(json::parse(R"({"bonus": 3})"), "p"), ConfigError);
  CHECK_THROWS_AS(gpulab::cli::parse_points(json::parse(R"({"cases": {"x": {"points": -2}}})"), "p"), ConfigError);
}

TEST_CASE("gradescope: results.json has the fields and types and values of the specification", "[cpu]") {
  // Gradescope's autograder specification: a top-level score (or one per test), tests[] with
  // name, score, max_score, status (passed or failed), output and visibility, leaderboard[] with
  // name, value and order (asc or desc).
  const json card = scorecard();
  const json gs = gpulab::cli::gradescope_results(card, gpulab::cli::score_scorecard(card, Points{}), 12.5);
  REQUIRE(gs["score"].is_number());
  CHECK(gs["score"].get<double>() == Approx(4.0));
  CHECK(gs["max_score"].get<double>() == Approx(8.0));
  CHECK(gs["execution_time"].get<double>() == 12.5);
  const std::set<std::string> visibilities = {"visible", "hidden", "after_due_date", "after_published"};
  CHECK(visibilities.count(gs["visibility"].get<std::string>()) == 1);
  REQUIRE(gs["tests"].is_array());
  double sum = 0.0;
  for (const json& t : gs["tests"]) {
    INFO(t.dump());
    REQUIRE(t["name"].is_string());
    REQUIRE(t["score"].is_number());
    REQUIRE(t["max_score"].is_number());
    CHECK(t["score"].get<double>() <= t["max_score"].get<double>());
    CHECK((t["status"] == "passed" || t["status"] == "failed"));
    CHECK(t["output"].is_string());
    CHECK(visibilities.count(t["visibility"].get<std::string>()) == 1);
    sum += t["score"].get<double>();
  }
  CHECK(sum == Approx(gs["score"].get<double>()));
  // Only what passed reaches the leaderboard, with its figure.
  REQUIRE(gs["leaderboard"].size() == 1);
  CHECK(gs["leaderboard"][0]["name"] == "bandwidth (GB/s)");
  CHECK(gs["leaderboard"][0]["value"].get<double>() == 4.2);
  CHECK(gs["leaderboard"][0]["order"] == "desc");
}

TEST_CASE("junit: every scored check is a testcase with failed and not-run ones marked as the parser selftest uses reads them", "[cpu]") {
  json card = scorecard();
  card["checks"][1]["name"] = "names <escaped> & \"quoted\"";
  const std::string xml = gpulab::cli::junit_report(card, gpulab::cli::score_scorecard(card, Points{}));
  const auto cases = gpulab::cli::parse_junit(xml);
  REQUIRE(cases.size() == 6);  // 4 correctness + 2 performance; the build, stretch and integrity lines carry no points and did not fail
  int failed = 0, skipped = 0, passed = 0;
  for (const auto& c : cases) {
    failed += c.failed ? 1 : 0;
    skipped += c.skipped ? 1 : 0;
    passed += c.failed || c.skipped ? 0 : 1;
  }
  CHECK(failed == 3);  // a failed case, a slow one, and a logic error found on the emulator (never reported as passed)
  CHECK(skipped == 1);
  CHECK(passed == 2);
  CHECK(xml.find("names &lt;escaped&gt; &amp; &quot;quoted&quot;") != std::string::npos);
}

TEST_CASE("classroom: the result has the fields the reporter reads and its scores add up to the points", "[cpu]") {
  // education/autograding-grading-reporter: version, status (pass, fail or error), max_score and
  // tests[] with name, status (pass or fail), score and message; it adds up the tests' scores.
  const json card = scorecard();
  const gpulab::cli::PointsResult points = gpulab::cli::score_scorecard(card, Points{});
  const json r = gpulab::cli::classroom_results(points);
  CHECK(r["version"] == 1);
  CHECK(r["status"] == "fail");  // a check failed
  CHECK(r["max_score"].get<double>() == Approx(points.max_score));
  REQUIRE(r["tests"].is_array());
  REQUIRE(r["tests"].size() == points.checks.size());
  double sum = 0.0;
  int passed = 0;
  for (const json& t : r["tests"]) {
    INFO(t.dump());
    REQUIRE(t["name"].is_string());
    CHECK((t["status"] == "pass" || t["status"] == "fail"));
    REQUIRE(t["score"].is_number());
    CHECK(t["message"].is_string());
    sum += t["score"].get<double>();
    passed += t["status"] == "pass" ? 1 : 0;
  }
  CHECK(sum == Approx(points.score));
  CHECK(passed == 2);  // the not-run GPU case and the logic error on the emulator are not passes
  // A forged run is an error with no points.
  const json forged = gpulab::cli::classroom_results(gpulab::cli::score_scorecard(scorecard(true), Points{}));
  CHECK(forged["status"] == "error");
  double forged_sum = 0.0;
  for (const json& t : forged["tests"]) forged_sum += t["score"].get<double>();
  CHECK(forged_sum == 0.0);
}
