/// @file points.cpp
/// @brief Points from a scorecard, and Gradescope's, GitHub Classroom's and JUnit's formats (points.hpp).
#include "grade/points.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace gpulab::cli {

using json = nlohmann::json;

namespace {

/// The case's name without the width the grader adds ("... (W=2)").
std::string case_of(const std::string& name) {
  const auto w = name.rfind(" (W=");
  return w != std::string::npos && name.back() == ')' ? name.substr(0, w) : name;
}

std::string lines(const json& check) {
  std::string out;
  for (const char* key : {"details", "hints"}) {
    for (const auto& line : check.value(key, json::array())) out += line.get<std::string>() + "\n";
  }
  return out;
}

std::string format_points(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

}  // namespace

std::string xml_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 allows no control characters but tab, newline and carriage return.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') {
          out += ' ';
        } else {
          out += c;
        }
    }
  }
  return out;
}

PointsResult score_scorecard(const json& scorecard, const Points& rule) {
  PointsResult r;
  for (const json& c : scorecard.at("checks")) {
    const std::string kind = c.value("kind", ""), status = c.value("status", "");
    if (kind == "integrity" && status == "fail") r.integrity_failed = true;
  }
  for (const json& c : scorecard.at("checks")) {
    ScoredCheck s;
    s.name = c.value("name", "");
    s.status = c.value("status", "");
    s.seconds = c.value("seconds", 0.0);
    const std::string kind = c.value("kind", "");
    const auto override_it = rule.cases.find(case_of(s.name));
    const CasePoints* custom = override_it == rule.cases.end() ? nullptr : &override_it->second;
    s.visibility = custom != nullptr && !custom->visibility.empty() ? custom->visibility : rule.visibility;
    const bool judged = kind == "correctness" || kind == "structure" || kind == "sanitizer";
    const bool perf = kind == "performance";
    if ((!judged && !perf) || s.status == "stretch" || s.status == "info") {
      // No points of their own; a failed one still explains (a build error, a forged result).
      if (s.status != "fail") continue;
      s.output = lines(c) + "(no points of its own: " + (kind == "build" ? "nothing below it could run" : "see the other lines") + ")\n";
      r.checks.push_back(s);
      continue;
    }
    s.max_score = custom != nullptr && custom->points >= 0 ? custom->points : perf ? rule.performance : rule.correctness;
    std::string why;
    if (s.status == "pass" || s.status == "emu-pass") {
      // An emulated pass is a logic check on the CPU, not the GPU check: it earns nothing.
      s.score = s.status == "pass" ? s.max_score : 0.0;
      if (s.status == "emu-pass") why = "passed on the CPU emulator only: the GPU check is still to run (grade on a GPU machine)";
    } else if (s.status == "not-run" || s.status == "emu-not-run") {
      why = "NOT RUN on this machine (" + scorecard.value("not_run_reason", std::string("it lacks what the check needs")) +
            "): not passed; grade on a machine that has it";
    } else if (perf) {
      const json& d = c.value("data", json::object());
      const double threshold = d.value("threshold", 0.0), mine = d.value("learner_fraction", 0.0), theirs = d.value("reference_fraction", 0.0);
      const double relative = theirs > 0 ? mine / theirs : 0.0;
      const double floor = rule.performance_floor * threshold;
      if (threshold > 0 && relative > floor) s.score = s.max_score * std::min(1.0, (relative - floor) / (threshold - floor));
      why = "at " + format_points(100.0 * relative) + " % of the reference, against " + format_points(100.0 * threshold) +
            " % for all points and " + format_points(100.0 * floor) + " % or less for none";
    }
    if (r.integrity_failed && s.score > 0) {
      s.score = 0.0;
      why = "the integrity check failed: no points for any check";
    }
    if (perf && c.contains("data") && c["data"].contains("learner_value")) {
      s.leaderboard = true;
      s.value = c["data"].value("learner_value", 0.0);
      s.unit = c["data"].value("unit", "");
    }
    s.output = lines(c) + (why.empty() ? "" : why + "\n") + format_points(s.score) + " of " + format_points(s.max_score) + " points\n";
    r.score += s.score;
    r.max_score += s.max_score;
    r.checks.push_back(s);
  }
  return r;
}

json gradescope_results(const json& scorecard, const PointsResult& points, double execution_time_s) {
  json tests = json::array(), board = json::array();
  for (const ScoredCheck& s : points.checks) {
    tests.push_back({{"name", s.name}, {"score", s.score}, {"max_score", s.max_score}, {"status", s.score >= s.max_score && s.status == "pass" ? "passed" : "failed"},
                     {"output", s.output}, {"visibility", s.visibility}});
    if (s.leaderboard && !points.integrity_failed && s.status == "pass") board.push_back({{"name", s.name + " (" + s.unit + ")"}, {"value", s.value}, {"order", "desc"}});
  }
  const json summary = scorecard.value("summary", json::object());
  std::ostringstream out;
  out << "lab " << scorecard.value("lab", "") << ": " << format_points(points.score) << " of " << format_points(points.max_score) << " points; "
      << summary.value("passed", 0) << " checks passed, " << summary.value("failed", 0) << " failed, " << summary.value("not_run", 0)
      << " not run here";
  if (points.integrity_failed) out << "; the integrity check failed, so no check earns points";
  return {{"score", points.score}, {"max_score", points.max_score}, {"execution_time", execution_time_s}, {"output", out.str()},
          {"visibility", "visible"}, {"stdout_visibility", "hidden"}, {"tests", tests}, {"leaderboard", board}};
}

json classroom_results(const PointsResult& points) {
  json tests = json::array();
  bool failed = false;
  for (const ScoredCheck& s : points.checks) {
    const bool passed = s.status == "pass" && s.score >= s.max_score;
    failed = failed || !passed;
    tests.push_back({{"name", s.name},
                     {"status", passed ? "pass" : "fail"},
                     {"score", s.score},
                     {"message", s.visibility == "visible" ? s.output : std::string("(its output is shown after the due date)")}});
  }
  return {{"version", 1}, {"status", points.integrity_failed ? "error" : failed ? "fail" : "pass"}, {"max_score", points.max_score}, {"tests", tests}};
}

std::string junit_report(const json& scorecard, const PointsResult& points) {
  int failures = 0, skipped = 0;
  double seconds = 0.0;
  for (const ScoredCheck& s : points.checks) {
    failures += s.status == "fail" || s.status == "emu-fail" ? 1 : 0;
    skipped += s.status == "not-run" || s.status == "emu-not-run" || s.status == "emu-pass" ? 1 : 0;
    seconds += s.seconds;
  }
  const std::string lab = scorecard.value("lab", "");
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n<testsuite name=\"" << xml_escape("gpulab " + lab) << "\" tests=\""
    << points.checks.size() << "\" failures=\"" << failures << "\" skipped=\"" << skipped << "\" time=\"" << seconds << "\">\n";
  x << "<properties><property name=\"score\" value=\"" << points.score << "\"/><property name=\"max_score\" value=\"" << points.max_score
    << "\"/></properties>\n";
  for (const ScoredCheck& s : points.checks) {
    x << "<testcase classname=\"" << xml_escape(lab) << "\" name=\"" << xml_escape(s.name) << "\" time=\"" << s.seconds << "\">";
    if (s.status == "fail" || s.status == "emu-fail") {  // a logic error found on the emulator fails anywhere
      x << "<failure message=\"" << xml_escape(s.name) << "\">" << xml_escape(s.output) << "</failure>";
    } else if (s.status == "not-run" || s.status == "emu-not-run" || s.status == "emu-pass") {
      x << "<skipped message=\"" << xml_escape(s.output) << "\"/>";
    }
    x << "<system-out>" << xml_escape(s.output) << "</system-out></testcase>\n";
  }
  x << "</testsuite>\n</testsuites>\n";
  return x.str();
}

}  // namespace gpulab::cli
