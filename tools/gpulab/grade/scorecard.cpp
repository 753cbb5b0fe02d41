/// @file scorecard.cpp
/// @brief Counting, printing and JSON of the scorecard (see scorecard.hpp).
#include "grade/scorecard.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

namespace gpulab::cli {
namespace {

std::string paint(const std::string& s, const char* code, bool colour) {
  return colour ? std::string("\033[") + code + "m" + s + "\033[0m" : s;
}

bool counted_as_failure(Status s) { return s == Status::kFail || s == Status::kEmuFail; }

}  // namespace

const char* to_string(Status s) {
  switch (s) {
    case Status::kPass: return "pass";
    case Status::kFail: return "fail";
    case Status::kNotRun: return "not-run";
    case Status::kInfo: return "info";
    case Status::kStretch: return "stretch";
    case Status::kEmuPass: return "emu-pass";
    case Status::kEmuFail: return "emu-fail";
    case Status::kEmuNotRun: return "emu-not-run";
  }
  return "?";
}

const char* to_string(Kind k) {
  switch (k) {
    case Kind::kBuild: return "build";
    case Kind::kStructure: return "structure";
    case Kind::kDiagnosis: return "diagnosis";
    case Kind::kCorrectness: return "correctness";
    case Kind::kSanitizer: return "sanitizer";
    case Kind::kProfile: return "profile";
    case Kind::kPerformance: return "performance";
    case Kind::kIntegrity: return "integrity";
  }
  return "?";
}

const char* to_string(Where w) { return w == Where::kCpu ? "cpu" : w == Where::kGpu ? "gpu" : ""; }

Where where_from_string(const std::string& w) { return w == "cpu" ? Where::kCpu : w == "gpu" ? Where::kGpu : Where::kNone; }

Check Check::failure(const std::string& name, Kind kind, const std::string& detail, const std::string& hint) {
  Check c;
  c.name = name;
  c.kind = kind;
  c.details = {detail};
  if (!hint.empty()) c.hints = {hint};
  return c;
}

std::string status_word(Status s, bool colour) {
  switch (s) {
    case Status::kPass: return paint("PASS    ", "32", colour);
    case Status::kFail: return paint("FAIL    ", "1;31", colour);
    case Status::kInfo: return paint("INFO    ", "36", colour);
    case Status::kStretch: return paint("OPT     ", "35", colour);
    case Status::kEmuPass: return paint("EMU ok  ", "32", colour);
    case Status::kEmuFail: return paint("EMU FAIL", "1;31", colour);
    case Status::kEmuNotRun: return paint("EMU N/A ", "33", colour);
    case Status::kNotRun: break;
  }
  return paint("N/A     ", "33", colour);
}

Scorecard::Scorecard(bool quiet, std::ostream* out) : quiet_(quiet), out_(out != nullptr ? out : &std::cout) {}

void Scorecard::add(Check check) {
  print(check);
  checks_.push_back(std::move(check));
}

void Scorecard::keep(Check check) { checks_.push_back(std::move(check)); }

void Scorecard::print(const Check& c) const {
  // Quiet runs (selftest) still show failures, stretch goals not reached (not counted, but a
  // learner who tried one must see why) and every performance figure.
  if (quiet_ && !counted_as_failure(c.status) && c.status != Status::kStretch && !(c.kind == Kind::kPerformance && c.status == Status::kPass)) return;
  const bool colour = out_ == &std::cout && isatty(STDOUT_FILENO) != 0;
  char head[600];
  const std::string where = c.where == Where::kNone ? "     " : std::string("[") + to_string(c.where) + "]";
  std::snprintf(head, sizeof head, "  %s  %s %-58s %6.1f s", status_word(c.status, colour).c_str(), where.c_str(), c.name.c_str(),
                c.seconds);
  *out_ << head << '\n';
  for (const std::string& d : c.details) *out_ << "        " << d << '\n';
  if (verbose_ && c.data.contains("facts")) {
    for (const auto& f : c.data["facts"]) *out_ << "        " << paint("held: ", "32", colour) << f.get<std::string>() << '\n';
  }
  for (const std::string& h : c.hints) *out_ << "        " << paint("hint: ", "36", colour) << h << '\n';
  out_->flush();
}

Counts Scorecard::counts() const {
  Counts n;
  for (const Check& c : checks_) {
    switch (c.status) {
      case Status::kPass: ++n.passed; break;
      case Status::kFail: case Status::kEmuFail: ++n.failed; break;
      case Status::kNotRun: ++n.not_run; break;
      case Status::kStretch: ++n.stretch; break;
      case Status::kEmuPass: ++n.emulated_ok; ++n.not_run; break;
      case Status::kEmuNotRun: ++n.emulated_not_run; ++n.not_run; break;
      case Status::kInfo: break;
    }
  }
  return n;
}

int Scorecard::exit_code() const {
  const Counts n = counts();
  return n.failed > 0 ? 1 : n.not_run > 0 ? 2 : 0;
}

void Scorecard::print_summary(const std::string& not_run_reason) const {
  const Counts n = counts();
  *out_ << "\n  result: " << n.passed << " passed, " << n.failed << " failed, " << n.not_run << " not run here";
  if (n.emulated_ok + n.emulated_not_run > 0) {
    *out_ << " (" << n.emulated_ok << " of them ok on the CPU emulator";
    if (n.emulated_not_run > 0) *out_ << ", " << n.emulated_not_run << " beyond it";
    *out_ << ")";
  }
  if (n.stretch > 0) *out_ << ", " << n.stretch << " stretch goal" << (n.stretch > 1 ? "s" : "") << " not reached (not counted)";
  // A usage error (--case naming no single case) is not the machine's fault: say so, not the GPU's.
  const bool usage = std::any_of(checks_.begin(), checks_.end(), [](const Check& c) { return c.data.value("usage", false); });
  if (usage) *out_ << " [--case must name one test case]";
  else if (n.not_run > 0 && !not_run_reason.empty()) *out_ << " [" << not_run_reason << "]";
  *out_ << "  →  exit " << exit_code() << '\n';
  if (const Outside o = outside(); o.passed > 0) {
    *out_ << "  judged outside the test process by their values: " << o.judged << " of " << o.passed << " passed cases";
    if (o.judged < o.passed) *out_ << " (the others' checks send no values: README.md, \"The grader\", known limits)";
    *out_ << '\n';
  }
  if (n.failed == 0 && n.not_run > 0 && !usage) {
    *out_ << "  The checks marked N/A or EMU could not run on a GPU here; none of them is counted as passed.\n"
             "  ./gpulab doctor shows what this machine lacks; grade where it is present to complete the grade.\n";
  }
  out_->flush();
}

Scorecard::Outside Scorecard::outside() const {
  Outside o;
  for (const Check& c : checks_) {
    if ((c.status != Status::kPass && c.status != Status::kEmuPass) || !c.data.contains("outside")) continue;
    ++o.passed;
    if (c.data["outside"].value("compared", 0) > 0) ++o.judged;
  }
  return o;
}

nlohmann::json Scorecard::to_json() const {
  nlohmann::json checks = nlohmann::json::array();
  for (const Check& c : checks_) {
    checks.push_back({{"name", c.name}, {"kind", to_string(c.kind)}, {"where", to_string(c.where)}, {"status", to_string(c.status)},
                      {"seconds", c.seconds}, {"details", c.details}, {"hints", c.hints}, {"data", c.data}});
  }
  const Counts n = counts();
  return {{"checks", checks},
          {"exit_code", exit_code()},
          {"summary",
           {{"passed", n.passed}, {"failed", n.failed}, {"not_run", n.not_run}, {"stretch_not_reached", n.stretch},
            {"emulated_ok", n.emulated_ok}, {"emulated_not_run", n.emulated_not_run},
            {"judged_outside", outside().judged}, {"passed_cases_judged", outside().passed}}}};
}

}  // namespace gpulab::cli
