/// @file gpulab_test.hpp
/// @brief Checks shared by the lab tests: each one records what it found for the scorecard
/// (gpulab::report) and then asserts, so a failure reads the same in Catch2 and in the grader.
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "gpulab/compare.hpp"
#include "gpulab/report.hpp"

namespace gpulab::testing {

/// True under `gpulab grade --sanitize` (GPULAB_SMALL=1): the sanitizers slow kernels 10–100×,
/// so tests keep their smaller problems only.
inline bool small_run() {
  const char* v = std::getenv("GPULAB_SMALL");
  return v != nullptr && *v != '\0' && *v != '0';
}

/// True under `gpulab grade --profile` (GPULAB_PROFILE=1): a profiled case runs its kernel once,
/// inside its NVTX range, and prints "gpulab-profile: min_bytes N" for the grader (profile.hpp).
inline bool profile_run() {
  const char* v = std::getenv("GPULAB_PROFILE");
  return v != nullptr && std::string(v) == "1";
}

/// Records a comparison ("correctness" record) and CHECKs it.
inline void check_result(const CompareResult& r, const std::string& what,
                         const std::string& hint = "") {
  nlohmann::json rec = {{"kind", "correctness"}, {"check", what},     {"ok", r.ok()},
                        {"summary", r.summary(what)}, {"elements", r.count},
                        {"mismatches", r.mismatches}, {"non_finite", r.non_finite},
                        {"max_error", r.max_error}};
  if (!r.first.empty()) {
    rec["first_mismatch"] = {{"index", r.first[0].index}, {"got", r.first[0].got},
                             {"want", r.first[0].want}, {"bound", r.first[0].bound}};
  }
  if (!r.ok() && !hint.empty()) rec["hint"] = hint;
  report::record(rec);
  INFO(r.summary(what));
  CHECK(r.ok());
}

/// Records a plain pass/fail fact with a message, and CHECKs it.
inline void check_fact(bool ok, const std::string& what, const std::string& detail,
                       const std::string& hint = "") {
  nlohmann::json rec = {{"kind", "correctness"}, {"check", what}, {"ok", ok}, {"summary", what + ": " + detail}};
  if (!ok && !hint.empty()) rec["hint"] = hint;
  report::record(rec);
  INFO(what << ": " << detail);
  CHECK(ok);
}

/// Records that a check could not run on this machine (e.g. not enough device memory). The
/// grader shows it as NOT RUN, never as passed.
inline void not_run(const std::string& what, const std::string& why) {
  report::record({{"kind", "correctness"}, {"check", what}, {"ok", nullptr}, {"not_run", why},
                  {"summary", what + ": not run here: " + why}});
  WARN(what << ": not run here: " << why);
}

/// Records a performance measurement. The test only measures; the grader decides.
inline void record_performance(const std::string& metric, double value, const std::string& unit,
                               double baseline, const std::string& baseline_name,
                               nlohmann::json extra = nlohmann::json::object()) {
  extra["kind"] = "performance";
  extra["metric"] = metric;
  extra["value"] = value;
  extra["unit"] = unit;
  extra["baseline"] = baseline;
  extra["baseline_name"] = baseline_name;
  extra["fraction_of_baseline"] = baseline > 0.0 ? value / baseline : 0.0;
  for (const char* group : {"gpu_state", "peaks"}) {  // flatten gpu_state_fields() and peak_fields()
    if (!extra.contains(group)) continue;
    const nlohmann::json fields = extra[group];
    extra.erase(group);
    extra.update(fields);
  }
  report::record(extra);
  INFO(metric << ": " << value << ' ' << unit << " (" << baseline_name << ": " << baseline << ' '
              << unit << ')');
  // Nothing measured is a failure with its reason on the scorecard, not a bare assertion.
  if (!(value > 0.0)) {
    check_fact(false, metric + " measured something",
               "0 " + unit + ": the work this case times did not run, or did nothing",
               "make this TODO's correctness cases pass first: a performance case times work that must already be right");
  }
}

}  // namespace gpulab::testing
