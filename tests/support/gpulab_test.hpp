/// @file gpulab_test.hpp
/// @brief Checks shared by the lab tests: each one records what it found for the scorecard
/// (gpulab::report) and then asserts, so a failure reads the same in Catch2 and in the grader.
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <type_traits>
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

/// The name of an element type in an output record ("f32", "u16", ...), as the grader reads it;
/// another type (__half, __nv_bfloat16, an fp8 byte) is its bits ("u16", "u8"), compared bit for bit.
template <class T>
constexpr const char* element_type() {
  static_assert(std::is_trivially_copyable_v<T> && (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8),
                "outputs are arrays of numbers");
  if constexpr (!std::is_arithmetic_v<T>) {
    return sizeof(T) == 1 ? "u8" : sizeof(T) == 2 ? "u16" : sizeof(T) == 4 ? "u32" : "u64";
  } else if constexpr (std::is_floating_point_v<T>) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "fp32 or fp64");
    return sizeof(T) == 4 ? "f32" : "f64";
  } else if constexpr (std::is_signed_v<T>) {
    return sizeof(T) == 1 ? "i8" : sizeof(T) == 2 ? "i16" : sizeof(T) == 4 ? "i32" : "i64";
  } else {
    return sizeof(T) == 1 ? "u8" : sizeof(T) == 2 ? "u16" : sizeof(T) == 4 ? "u32" : "u64";
  }
}

/// Sends a check's values out of the process (gpulab::report::output): the values under test
/// always, what they were compared with only in the reference's run. The grader compares a
/// submission's values with the reference's run on the same inputs, after both processes ended,
/// so a verdict does not rest on what the process under test said about itself.
template <class T>
void send_output(const std::string& what, const char* compare, const std::vector<T>& got, const std::vector<T>* want,
                 const std::vector<double>* want_f64 = nullptr, const std::vector<double>* bound = nullptr) {
  const report::Outputs wanted = report::outputs_wanted();
  if (wanted == report::Outputs::kNone) return;
  std::vector<report::Block> blocks = {{got.data(), got.size() * sizeof(T)}};
  nlohmann::json header = {{"check", what}, {"compare", compare}, {"type", element_type<T>()}, {"count", got.size()}, {"parts", {"got"}}};
  if (wanted == report::Outputs::kAll) {
    if (want != nullptr) {
      blocks.push_back({want->data(), want->size() * sizeof(T)});
      header["parts"].push_back("want");
    }
    if (want_f64 != nullptr) {
      blocks.push_back({want_f64->data(), want_f64->size() * sizeof(double)});
      header["parts"].push_back("want");
    }
    if (bound != nullptr) {
      blocks.push_back({bound->data(), bound->size() * sizeof(double)});
      header["parts"].push_back("bound");
    }
  }
  report::output(header, blocks);
}

/// |got[i] − want[i]| ≤ bound[i] for every i (gpulab::compare_within), recorded, CHECKed, and its
/// values sent out for the grader to compare outside the process.
inline void check_within(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& bound,
                         const std::string& what, const std::string& hint = "") {
  send_output<float>(what, "within", got, nullptr, &want, &bound);
  check_result(compare_within(got, want, bound), what, hint);
}

/// Bitwise equality (gpulab::compare_bitwise), recorded, CHECKed, and its values sent out.
template <class T>
void check_bitwise(const std::vector<T>& got, const std::vector<T>& want, const std::string& what, const std::string& hint = "") {
  send_output<T>(what, "bitwise", got, &want);
  check_result(compare_bitwise(got, want), what, hint);
}

/// Sends the values behind a check_fact that holds @p got to @p want bit for bit (a model's
/// parameters after k steps against one process), for the grader to compare again outside the
/// process; the fact's message stays the test's own.
template <class T>
void send_bitwise(const std::string& what, const std::vector<T>& got, const std::vector<T>& want) {
  send_output<T>(what, "bitwise", got, &want);
}

/// One array of all of @p parts, in order (a model's tensors, for send_bitwise).
template <class T>
std::vector<T> flattened(const std::vector<std::vector<T>>& parts) {
  std::vector<T> all;
  for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
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

/// A kernel's demangled name as a scorecard shows it: without its parameter list and without
/// "(anonymous namespace)::", so `lab04::(anonymous namespace)::hgemm_mma<128>(half const*, ...)`
/// reads `lab04::hgemm_mma<128>`. The parameter list is the parenthesised group that ends the
/// name (an anonymous namespace's parentheses come before it, a function type's inside <>).
inline std::string kernel_display_name(std::string name) {
  if (!name.empty() && name.back() == ')') {
    int depth = 0;
    for (std::size_t i = name.size(); i-- > 0;) {
      if (name[i] == ')') ++depth;
      if (name[i] == '(' && --depth == 0) {
        name.resize(i);
        break;
      }
    }
  }
  const std::string anonymous = "(anonymous namespace)::";
  for (std::size_t at = name.find(anonymous); at != std::string::npos; at = name.find(anonymous, at)) {
    name.erase(at, anonymous.size());
  }
  return name;
}

}  // namespace gpulab::testing
