/// @file stage_profile.cpp
/// @brief The profile stage (--profile): each NVTX range the lab names, its case once under ncu, the kernels inside judged.
#include <cstdlib>

#include "base/process.hpp"
#include "grade/grade_stages.hpp"
#include "grade/profile.hpp"

namespace gpulab::cli {

namespace {

std::string find_ncu() {
  for (const char* candidate : {"ncu", "/usr/local/cuda/bin/ncu"}) {
    if (run_process({candidate, "--version"}, {}).exited(0)) return candidate;
  }
  return "";
}

/// The minimum bytes a case in profile mode prints: "gpulab-profile: min_bytes <N>".
double printed_min_bytes(const std::string& output) {
  const std::string key = "gpulab-profile: min_bytes ";
  const std::size_t at = output.find(key);
  return at == std::string::npos ? 0.0 : std::atof(output.c_str() + at + key.size());
}

/// One range: its case once under ncu, the kernels inside the range, judged.
Check profile_range(const GradeInputs& in, LearnerRuns& runs, const std::string& ncu, const ProfileSpec& spec) {
  Check check;
  check.name = "profile " + spec.range;
  check.kind = Kind::kProfile;
  check.where = Where::kGpu;
  // ncu writes its report into a folder of its own, the one it may write in the sandbox.
  const std::string stem = runs.next_stem();
  const fs::path folder = in.log_dir / ("ncu-" + stem);
  fs::create_directories(folder);
  const fs::path csv = folder / "report.csv";
  ProcessOptions o;
  o.timeout_s = 10 * in.case_timeout();
  o.env = {{"GPULAB_PROFILE", "1"}, {"GPULAB_SEED", std::to_string(in.seed)}};
  // ncu starts the program itself, so it runs without gpulab-launch: sandboxed, without the
  // seccomp filter, its records not read (the verdict is ncu's counters).
  Sandbox box;
  if (runs.confinement().sandbox) {
    box = *runs.confinement().sandbox;
    box.show.push_back(in.build().exe);
    box.writable.push_back(folder.string());
    o.sandbox = &box;
  }
  const ProcessResult r = run_process({ncu, "--csv", "--page", "raw", "--print-units", "base", "--nvtx", "--nvtx-include", spec.range + "/",
                                       "--metrics", kProfileMetrics, "--log-file", csv.string(), in.build().exe, spec.case_name},
                                      o);
  check.seconds = r.seconds;
  write_text(in.log_dir / ("ncu-" + stem + ".log"), r.output);
  const std::string ncu_text = fs::exists(csv) ? read_text(csv) : "";
  if (ncu_lacks_permission(r.output + ncu_text)) {
    check.status = Status::kNotRun;
    check.details.push_back("ncu cannot read this GPU's counters (ERR_NVGPUCTRPERM): run as root, or allow profiling for all users "
                            "(NVreg_RestrictProfilingToAdminUsers=0); nothing was judged");
    return check;
  }
  if (!r.exited(0)) {
    check.details.push_back(spec.case_name + " under ncu: " + r.describe() + " (log: " + csv.string() + ")");
    return check;
  }
  const double min_bytes = printed_min_bytes(r.output);
  if (min_bytes <= 0) {
    check.details.push_back(spec.case_name + " printed no minimum (\"gpulab-profile: min_bytes N\"): the test's profile mode is missing");
    return check;
  }
  try {
    const ProfileVerdict v = judge_profile(parse_ncu_csv(ncu_text), spec.range, min_bytes, spec.max_kernels, spec.max_bytes_factor);
    check.status = v.ok ? Status::kPass : Status::kFail;
    check.details.push_back(v.summary);
    if (!v.ok) check.details.push_back(v.problem);
  } catch (const std::exception& e) {
    check.details.push_back(e.what());
  }
  return check;
}

}  // namespace

bool stage_profile(const GradeInputs& in, const Built& built, LearnerRuns& runs, Scorecard& card) {
  if (!in.options.profile) return true;
  if (in.lab.profile.empty()) {
    Check c = Check::failure("profile", Kind::kProfile, "lab " + in.lab.number + " names no NVTX ranges to profile (lab.json \"profile\")");
    c.status = Status::kNotRun;
    card.add(c);
    return true;
  }
  const std::string ncu = find_ncu();
  for (const ProfileSpec& spec : in.lab.profile) {
    std::string why_not;
    if (ncu.empty()) why_not = "Nsight Compute (ncu) was not found: it comes with the full CUDA toolkit";
    else if (!built.gpu_missing.empty()) why_not = "needs a GPU: " + built.gpu_missing;
    if (!why_not.empty()) {
      Check c = Check::failure("profile " + spec.range, Kind::kProfile, why_not);
      c.where = Where::kGpu;
      c.status = Status::kNotRun;
      card.add(c);
      continue;
    }
    card.add(profile_range(in, runs, ncu, spec));
    if (!runs.untampered(card)) return false;
  }
  return true;
}

}  // namespace gpulab::cli
