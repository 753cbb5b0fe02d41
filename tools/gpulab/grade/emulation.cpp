/// @file emulation.cpp
/// @brief [gpu] cases on the CPU block emulator (see emulation.hpp).
#include "grade/emulation.hpp"

#include <algorithm>
#include <iostream>

#include "grade/build.hpp"
#include "grade/grade_stages.hpp"

namespace gpulab::cli {
namespace {

/// The marker of a construct the emulator does not model (tools/emulator/emu.hpp: emu::Unsupported).
constexpr const char* kUnsupported = "the CPU emulator does not model";

bool mentions_unsupported(const Check& c) {
  for (const std::string& d : c.details) {
    if (d.find(kUnsupported) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

bool emulable(const CaseInfo& c) { return c.where == "gpu" && !c.measures(); }

Status emulated_status(const Check& judged) {
  switch (judged.status) {
    case Status::kPass: return Status::kEmuPass;
    case Status::kNotRun: return Status::kEmuNotRun;
    default: return mentions_unsupported(judged) ? Status::kEmuNotRun : Status::kEmuFail;
  }
}

Check emulate_case(const CaseInfo& c, const std::string& exe, const LabConfig& lab, RunSpec spec, const JudgeContext& judge) {
  spec.exe = exe;
  spec.case_name = c.name;
  spec.env["GPULAB_SMALL"] = "1";
  Check result;
  double seconds = 0.0;
  const std::string stem = spec.stem;
  for (const char* order : {"forward", "reverse"}) {
    // The second run also places each allocation's end against an inaccessible page: a read
    // one past the end then faults (tools/emulator/emu.hpp).
    const bool tight = std::string(order) == "reverse";
    spec.env["EMU_ORDER"] = order;
    spec.env["GPULAB_GUARD_TIGHT"] = tight ? "1" : "0";
    spec.stem = stem + "-emu-" + order;
    Check judged = judge_case(c, run_case(spec), lab, judge);
    const Status s = emulated_status(judged);
    seconds += judged.seconds;
    result = judged;
    result.status = s;
    result.seconds = seconds;
    if (s != Status::kEmuPass) {
      result.details.insert(result.details.begin(), std::string("on the CPU emulator, threads in ") + order + " order" +
                                                        (tight ? ", each buffer ending at an inaccessible page:" : ":"));
      if (s == Status::kEmuFail && std::string(order) == "reverse") {
        result.details.push_back("(it passed with the threads in order and room after each buffer: a hazard between threads of one step, "
                                 "e.g. a missing __syncthreads(), or a read just past the end of a buffer)");
      }
      return result;
    }
  }
  result.details = {"ok on the CPU emulator in both thread orders, with and without room after each buffer (logic only: the GPU check is still to run)"};
  result.data.erase("records");
  return result;
}

int emulate_command(const Paths& paths, const GradeOptions& options) {
  const std::optional<LabConfig> lab = find_lab(paths, options.lab);
  if (!lab) {
    std::cout << "gpulab emulate: no lab \"" << options.lab << "\"\n";
    return 1;
  }
  GradeInputs in{paths, options, *lab};
  LearnerRuns runs;  // numbers the logs; `emulate` is not a grade and arms no guard
  in.sources = options.solutions ? Sources::kReference : !options.submission.empty() ? Sources::kSubmission : Sources::kLab;
  in.variant = options.solutions ? "emu_ref" : !options.submission.empty() ? "emu_sub" : "emu_lab";
  in.source_dir = options.solutions ? lab->solutions : !options.submission.empty() ? fs::absolute(options.submission) : lab->labs;
  in.compiled_dir = in.sources == Sources::kSubmission ? lab->build.submission_dir : in.source_dir;
  in.seed = options.seed ? *options.seed : 12345;
  in.log_dir = paths.build / "emulate" / lab->number;
  std::cout << "gpulab emulate " << lab->number << " · " << lab->title << " on the CPU block emulator (logic, not speed; not a grade)\n"
            << "  sources  " << in.source_dir.string() << "\n  seed     " << in.seed << "\n\n";
  if (!lab->build.emulated()) {
    std::cout << "  lab " << lab->number << " has no emulator build: "
              << (lab->distributed() ? "it runs on the CPU as it is; grade it with ./gpulab grade " + lab->number : "its tests use their own main")
              << "\n";
    return 2;
  }
  Scorecard card(options.quiet);
  fs::remove_all(in.log_dir);
  fs::create_directories(in.log_dir);
  if (!stage_sources(in, card)) return 1;
  const BuildResult b = build_targets(paths, {in.build().target, lab->build.variant("emu_ref")->target});
  if (!b.ok) {
    card.add(Check::failure("emulator build", Kind::kBuild, extract_diagnostics(b.output)));
    return 1;
  }
  ProcessOptions o;
  const ProcessResult listed = run_process({lab->build.variant("emu_ref")->exe, "--gpulab-list"}, o);
  for (const CaseInfo& c : parse_case_list(listed.output)) {
    if (!emulable(c)) continue;
    if (!options.cases.empty() && std::find(options.cases.begin(), options.cases.end(), c.name) == options.cases.end()) continue;
    RunSpec spec{"", c.name, 0, in.case_timeout(), in.seed, in.log_dir, runs.next_stem(), {}, {}, ""};
    JudgeContext judge;
    judge.timeout_s = spec.timeout_s;
    judge.gpu_missing = "the CPU emulator";
    Check check = emulate_case(c, in.build().exe, in.lab, spec, judge);
    mark_stretch(c, check);
    card.add(check);
  }
  const Counts n = card.counts();
  std::cout << "\n  emulated: " << n.emulated_ok << " ok, " << n.failed << " failed, " << n.emulated_not_run << " beyond the emulator\n";
  return n.failed > 0 ? 1 : n.emulated_not_run > 0 ? 2 : 0;
}

}  // namespace gpulab::cli
