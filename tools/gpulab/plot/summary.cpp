/// @file summary.cpp
/// @brief Results tables from saved JSON (see summary.hpp).
#include "plot/summary.hpp"

#include <iostream>
#include <sstream>

#include "base/files.hpp"

namespace gpulab::cli {
namespace {

void scorecard(const nlohmann::json& j, std::ostringstream& out) {
  const auto& s = j["summary"];
  out << "lab " << j.value("lab", "?") << " (" << j.value("sources", "?") << "): " << s.value("passed", 0) << " passed, "
      << s.value("failed", 0) << " failed, " << s.value("not_run", 0) << " not run, exit " << j.value("exit_code", -1) << "\n";
  for (const auto& c : j["checks"]) {
    const std::string status = c.value("status", "");
    const bool perf = c.value("kind", "") == "performance" && status != "not-run";
    if (!perf && status != "fail" && status != "emu-fail") continue;
    out << "  " << status << "  " << c.value("name", "") << "\n";
    const auto& details = c["details"];
    for (std::size_t k = 0; k < details.size() && k < (perf ? 3u : 2u); ++k) out << "      " << details[k].get<std::string>() << "\n";
  }
}

void selftest_rows(const nlohmann::json& j, std::ostringstream& out) {
  for (const auto& r : j["rows"]) {
    if (r.value("status", "") == "fail") out << "  FAIL  " << r.value("step", "") << "  — " << r.value("detail", "") << "\n";
  }
  out << "selftest: " << j.value("passed", 0) << " passed, " << j.value("failed", 0) << " failed, " << j.value("skipped", 0) << " skipped\n";
}

}  // namespace

std::string summarize(const nlohmann::json& j, const std::string& name) {
  std::ostringstream out;
  if (j.is_object() && j.contains("checks") && j.contains("summary")) {
    scorecard(j, out);
  } else if (j.is_object() && j.contains("rows")) {
    selftest_rows(j, out);
  } else {
    out << name << ": neither a scorecard nor selftest's rows\n";
  }
  return out.str();
}

int summary_command(const std::vector<std::string>& files) {
  int rc = 0;
  for (const std::string& f : files) {
    const auto j = nlohmann::json::parse(read_text(f), nullptr, false);
    if (j.is_discarded()) {
      std::cout << f << ": not JSON\n";
      rc = 1;
      continue;
    }
    std::cout << summarize(j, f);
  }
  return rc;
}

}  // namespace gpulab::cli
