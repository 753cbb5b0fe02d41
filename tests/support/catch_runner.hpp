/// @file catch_runner.hpp
/// @brief The gpulab test main: Catch2 with [cpu]/[gpu] tags enforced and honest exit codes.
///
/// Exit codes: 0 every selected case passed; 1 something failed (Catch2 v2 would return the
/// number of failed assertions, so 77 failures would read as a skip); 77 when some selected cases
/// could not run here and everything that ran passed (CTest's SKIP_RETURN_CODE): [gpu] cases
/// without a usable CUDA device, and [cluster] cases without root, iproute2, mpirun or the right to
/// make namespaces. A selection that mixes them runs what can run and returns 77 if it passes.
/// A filter that matches no case is an error. `--gpulab-list` prints "kind<TAB>name<TAB>tags"
/// per case and fails if any case has neither or both of [cpu] and [gpu]; `--gpulab-probe` exits 0
/// when a CUDA device can be used, else 77 with the reason.
///
/// Evidence of completion: once the Catch2 session has returned, the runner writes one
/// "completion" record per case (gpulab::report): its name, the assertions Catch2 counted passed
/// and failed, and GPULAB_RUN_TOKEN (which the grader sets afresh for each process); a skipped
/// case ([gpu] without a device, [cluster] without root) gets one with "skipped" and the reason. The grader counts a case
/// only from that record: a process that exits before it (an exit() in the learner's code, a
/// crash, a hang) has not passed, whatever its exit code. Then one "end" record: anything
/// recorded after it (a static destructor, an exit handler) fails the run. Under the grader the
/// records go to gpulab-launch through a descriptor (tools/gpulab/launch/README.md).
#pragma once

#include <string>

namespace gpulab::testing {

/// Returns "" when a CUDA device can be used, else why not (e.g. "no NVIDIA driver").
using DeviceProbeFn = std::string (*)();

/// Runs Catch2 with gpulab's rules (see the file comment).
int run_tests(int argc, char** argv, DeviceProbeFn probe);

/// Called when a case cannot go on (a REQUIRE failed or an exception escaped it), with Catch2's
/// message. The MPI main uses it to abort every rank: the others would otherwise wait forever
/// for messages this rank will never send.
using FatalFailureHook = void (*)(const std::string& message);
void set_fatal_failure_hook(FatalFailureHook hook);

}  // namespace gpulab::testing
