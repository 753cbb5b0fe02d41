/// @file emulation.hpp
/// @brief A lab's own [gpu] test cases on the CPU block emulator (tools/emulator): inside
/// `gpulab grade` when there is no GPU, and as `gpulab emulate NN` anywhere.
///
/// Each case runs twice, with GPULAB_SMALL=1 (the tests' smaller problems): the threads of every
/// step in order, then reversed with each allocation ending against an inaccessible page (so
/// that a read just past the end faults). What the scorecard says:
///   EMU ok    passed in both orders: the logic (indices, loops, barriers, edges) holds. Not a GPU
///             pass: it counts as not run, and the exit code stays 2.
///   EMU FAIL  an assertion, a guard band, a bounds fault, a launch a GPU would refuse, a block
///             stuck at a barrier, or a hang: a logic error, so the grade fails (exit 1).
///   EMU N/A   the case uses something the emulator does not model (it says what).
/// [perf] and [timing] cases are never emulated: CPU timings say nothing about a GPU.
#pragma once

#include <string>

#include "base/lab_config.hpp"
#include "base/paths.hpp"
#include "grade/cases.hpp"
#include "grade/grade.hpp"

namespace gpulab::cli {

/// Whether the emulator can say anything about case @p c (a [gpu] case that is not timed).
bool emulable(const CaseInfo& c);

/// Runs @p c on the emulated executable @p exe in both thread orders and judges each run.
Check emulate_case(const CaseInfo& c, const std::string& exe, const LabConfig& lab, RunSpec spec, const JudgeContext& judge);

/// The EMU status for what judge_case said of one emulated run.
Status emulated_status(const Check& judged);

/// `gpulab emulate NN [--submission DIR | --solutions] [--case NAME]`: builds the lab for the
/// emulator and runs its [gpu] cases there. Exit 0 every case ok, 1 a failure, 2 some could not
/// be emulated.
int emulate_command(const Paths& paths, const GradeOptions& options);

}  // namespace gpulab::cli
