/// @file points.hpp
/// @brief A grade in points, and in the formats courses read: Gradescope's results.json, GitHub
/// Classroom's autograding result and JUnit XML. Works on the scorecard's JSON (Scorecard::to_json, or a file written by grade --json), so
/// a saved scorecard can be scored again.
///
/// The rule (lab.json "points", base/lab_config.hpp): correctness, structure and sanitizer checks
/// earn their points when they pass; a performance check earns its points in full when it
/// passes, and when it fails, linearly between performance_floor × its threshold (nothing) and
/// the threshold, by the graded code's fraction of the reference; a check that did not run here
/// (no GPU) earns nothing and says so, never counted as passed; stretch goals and the build,
/// diagnosis, profile and integrity lines carry no points of their own. A failed integrity check
/// (the grader's files changed, results forged) makes the whole score 0.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/lab_config.hpp"

namespace gpulab::cli {

/// One scored line.
struct ScoredCheck {
  std::string name;
  std::string status;      ///< the scorecard's: pass, fail, not-run, ...
  double score = 0.0, max_score = 0.0;
  std::string visibility;  ///< Gradescope's
  std::string output;      ///< what a student reads: the check's details and hints, and why the points
  double seconds = 0.0;
  bool leaderboard = false;  ///< a performance figure
  double value = 0.0;        ///< the figure (learner_value) and its unit, for the leaderboard
  std::string unit;
};

struct PointsResult {
  double score = 0.0, max_score = 0.0;
  bool integrity_failed = false;
  std::vector<ScoredCheck> checks;  ///< those with points, and the failed ones without (they explain)
};

/// The points of @p scorecard (Scorecard::to_json's object) under @p rule.
PointsResult score_scorecard(const nlohmann::json& scorecard, const Points& rule);

/// Gradescope's autograder results.json: score, max_score, execution_time, output, tests[] (name,
/// score, max_score, status passed/failed, output, visibility), leaderboard[] (name, value, order).
nlohmann::json gradescope_results(const nlohmann::json& scorecard, const PointsResult& points, double execution_time_s);

/// GitHub Classroom's autograding result, as its reporter (education/autograding-grading-reporter)
/// reads a runner's output once base64-decoded: version 1, status pass/fail/error, max_score, and
/// tests[] (name, status pass/fail, score, message); the reporter adds up the tests' scores. A
/// check hidden from students on Gradescope keeps its points but not its output.
nlohmann::json classroom_results(const PointsResult& points);

/// @p text for XML or HTML text and attributes: &, <, >, " and ' escaped, control characters but
/// tab and newlines made spaces.
std::string xml_escape(const std::string& text);

/// A JUnit XML report: one <testsuite> for the lab, a <testcase> per scored check, <failure> for a
/// failed one, <skipped> for one not run here.
std::string junit_report(const nlohmann::json& scorecard, const PointsResult& points);

}  // namespace gpulab::cli
