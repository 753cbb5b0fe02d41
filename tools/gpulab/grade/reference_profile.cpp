/// @file reference_profile.cpp
/// @brief The reference's assertions and times per case (see reference_profile.hpp).
#include "grade/reference_profile.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpulab/hash.hpp"

namespace gpulab::cli {

double derived_limit(double reference_s, double floor_s, double cap_s) {
  return std::min(cap_s, std::max(floor_s, 10.0 * reference_s + 5.0));
}

std::string describe_limit(double reference_s, double floor_s, double cap_s) {
  char text[160];
  std::snprintf(text, sizeof text, "10 × the reference's %.1f s + 5 s, at least %.0f s, at most %.0f s", reference_s, floor_s, cap_s);
  return text;
}

ReferenceProfile::ReferenceProfile(fs::path file, std::string build_hash) : file_(std::move(file)), build_hash_(std::move(build_hash)) {
  if (!fs::exists(file_)) return;
  const auto j = nlohmann::json::parse(read_text(file_), nullptr, false);
  if (!j.is_object() || j.value("reference", "") != build_hash_) return;  // another build: start afresh
  const nlohmann::json cases = j.value("cases", nlohmann::json::object());
  for (const auto& [key, r] : cases.items()) {
    runs_[key] = {r.value("assertions", -1L), r.value("seconds", 0.0), r.value("seed", std::uint64_t{0})};
  }
}

std::string ReferenceProfile::key(const std::string& case_name, int ranks, bool emulated) {
  return case_name + (ranks > 0 ? " @W=" + std::to_string(ranks) : "") + (emulated ? " @emulator" : "");
}

const ReferenceRun* ReferenceProfile::find(const std::string& key) const {
  const auto it = runs_.find(key);
  return it == runs_.end() ? nullptr : &it->second;
}

void ReferenceProfile::put(const std::string& key, const ReferenceRun& run) {
  runs_[key] = run;
  dirty_ = true;
}

void ReferenceProfile::save() const {
  if (!dirty_ || file_.empty()) return;
  nlohmann::json cases = nlohmann::json::object();
  for (const auto& [key, r] : runs_) cases[key] = {{"assertions", r.assertions}, {"seconds", r.seconds}, {"seed", r.seed}};
  write_text(file_, nlohmann::json{{"reference", build_hash_}, {"cases", cases}}.dump(1) + "\n");
}

std::string file_hash(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return "";
  std::uint64_t h = gpulab::kFnvOffsetBasis;
  // One buffer for every call: the guard hashes a few hundred files after each learner process,
  // and a fresh megabyte each time (zeroed) cost more than reading them.
  static thread_local std::vector<char> buffer(1 << 16);
  while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
    h = gpulab::fnv1a64(std::string_view(buffer.data(), static_cast<std::size_t>(in.gcount())), h);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace gpulab::cli
