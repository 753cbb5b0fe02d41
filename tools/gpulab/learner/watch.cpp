/// @file watch.cpp
/// @brief Re-grading on every save (see watch.hpp).
#include "learner/watch.hpp"

#include <chrono>
#include <iostream>
#include <thread>

#include "base/lab_config.hpp"
#include "base/process.hpp"
#include "learner/progress.hpp"

namespace gpulab::cli {

int watch(const Paths& paths, GradeOptions options, int max_runs, double poll_s) {
  const auto lab = find_lab(paths, options.lab);
  if (!lab) {
    std::cout << "gpulab watch: no lab \"" << options.lab << "\"\n";
    return 1;
  }
  const fs::path dir = options.submission.empty() ? lab->labs : fs::path(options.submission);
  auto stamp = [&] {
    std::string s;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.is_regular_file()) s += e.path().filename().string() + std::to_string(e.last_write_time().time_since_epoch().count()) + ";";
    }
    return s;
  };
  int runs = 0, last_exit = 0;
  std::string seen = stamp();
  for (;;) {
    std::cout << "\n── gpulab watch: grading " << dir.string() << " ──\n";
    const GradeResult result = grade(paths, options);
    last_exit = result.exit_code;
    if (options.submission.empty() && !options.solutions && options.cases.empty() && options.ranks.empty()) {
      record_progress(paths, result, lab->number, options.part, static_cast<int>(lab->parts.size()));
    }
    if (max_runs > 0 && ++runs >= max_runs) return last_exit;
    std::cout << "── waiting for a change in " << dir.string() << " (Ctrl-C to stop) ──" << std::endl;
    for (std::string now = stamp(); now == seen; now = stamp()) {
      throw_if_interrupted();  // Ctrl-C while waiting: main exits 130
      std::this_thread::sleep_for(std::chrono::duration<double>(poll_s));
    }
    // Let the editor finish writing (several files, or write-then-rename) before grading.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    seen = stamp();
  }
}

}  // namespace gpulab::cli
