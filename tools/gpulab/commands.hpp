/// @file commands.hpp
/// @brief What each `gpulab` command runs (main.cpp parses the command line and calls these).
#pragma once

#include <string>
#include <vector>

#include "author/bundle.hpp"
#include "author/grade_class.hpp"
#include "author/selftest.hpp"
#include "grade/emulation.hpp"
#include "grade/grade.hpp"
#include "learner/doctor.hpp"
#include "learner/hints.hpp"
#include "learner/progress.hpp"
#include "learner/watch.hpp"
#include "plot/summary.hpp"
#include "run/mpi.hpp"

namespace gpulab::cli {

/// `start`: doctor, the path, and a first grade of lab 01 (recorded as progress).
int start(const Paths& paths);
/// `list`: the labs, progress in each, their lessons, TODOs and stretch goals.
int list_labs(const Paths& paths);
/// `grade`: grade, write the charts when asked, record the learner's own progress.
int grade_and_record(const Paths& paths, const GradeOptions& options, bool plot);
/// `sync [--check] [--force]`.
int run_sync(const Paths& paths, bool check, bool force);
/// `plot FILE.json [--out DIR]`.
int plot_command(const std::string& scorecard, const std::string& out_dir);
/// `docs`: the Doxygen site.
int docs_command(const Paths& paths);
/// `gpu-plan`: the GPU proof's grades (scripts/gpu-check), from every lab.json's "gpu_check", in
/// the order of risk; one line each, tab-separated: "sass NN SLUG" (show labNN_ref's SASS) or
/// "grade NN NAME ENV ARGS" (ENV: K=V separated by spaces; ARGS: separated by \x1f; "-" for none).
int gpu_plan_command(const Paths& paths);
/// `doc-filter FILE`: Doxygen's input filter.
int doc_filter(const std::string& file);
/// `render`: a skeleton or mutant file, for the build.
int render_command(const std::string& mode, const std::string& region, const std::string& slug, const std::string& input,
                   const std::string& output);
/// `emu-transform`: a .cu file rewritten for the emulator, for the build.
int emu_transform_command(const std::string& input, const std::string& output);

}  // namespace gpulab::cli
