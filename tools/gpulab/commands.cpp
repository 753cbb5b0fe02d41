/// @file commands.cpp
/// @brief The small commands (see commands.hpp).
#include "commands.hpp"

#include <algorithm>
#include <iostream>
#include <regex>
#include <sstream>

#include "author/emu_transform.hpp"
#include "author/sync.hpp"
#include "base/lab_config.hpp"
#include "base/regions.hpp"
#include "docs/docs.hpp"
#include "grade/build.hpp"
#include "plot/plot.hpp"

namespace gpulab::cli {
namespace {

/// Whether any performance check measured a kernel's FLOP/s or bytes per second (what a roofline plots).
bool device_figures(const nlohmann::json& scorecard) {
  for (const auto& c : scorecard.value("checks", nlohmann::json::array())) {
    if (c.value("kind", "") != "performance" || c.value("where", "") != "gpu") continue;
    const std::string unit = c.contains("data") ? c["data"].value("unit", "") : "";
    if (unit.find("FLOP/s") != std::string::npos || unit.find("B/s") != std::string::npos) return true;
  }
  return false;
}

/// Writes ladder.svg, roofline.svg, (distributed training labs) timeline.svg and (lab 12) serving.svg into @p dir; false when there
/// was nothing to draw.
bool write_charts(const nlohmann::json& scorecard, const fs::path& dir) {
  bool any = false;
  const std::vector<std::pair<std::string, std::string>> charts = {
      {"ladder.svg", ladder_svg(scorecard)}, {"roofline.svg", roofline_svg(scorecard)}, {"timeline.svg", timeline_svg(scorecard)},
      {"serving.svg", serving_svg(scorecard)}};
  for (const auto& [name, svg] : charts) {
    if (svg.empty()) {
      if (name == "timeline.svg" || name == "serving.svg") continue;  // only the distributed training labs and lab 12 record one
      if (name == "roofline.svg" && !device_figures(scorecard)) continue;  // a host lab has no roofline to draw
      std::cout << "gpulab: no " << name << ": "
                << (name == "ladder.svg" ? "no performance check was measured" : "no check records its arithmetic intensity and the device's peak") << '\n';
      continue;
    }
    write_text(dir / name, svg);
    std::cout << "gpulab: wrote " << (dir / name).string() << '\n';
    any = true;
  }
  return any;
}

}  // namespace

int list_labs(const Paths& paths) {
  std::cout << "The path (curriculum.md has objectives, prerequisites and time for each):\n";
  const nlohmann::json progress = load_progress(paths);
  for (const LabConfig& lab : discover_labs(paths)) {
    std::string stretch;
    for (const auto& t : stretch_todos(lab, listed_cases(paths, lab))) stretch += (stretch.empty() ? "" : ", ") + t;
    std::cout << "  " << lab.number << "  " << lab.title << "\n      status  " << progress_line(progress, lab.number, static_cast<int>(lab.parts.size()))
              << "\n      lesson  lessons/" << lab.slug << ".md\n      lab     labs/" << lab.slug << "/  (" << lab.build.regions.size() << " TODOs"
              << (stretch.empty() ? "" : "; " + stretch + " a stretch goal") << ")\n";
    // A lab in parts: each part's files and TODOs, graded on its own.
    for (std::size_t k = 0; k < lab.parts.size(); ++k) {
      std::vector<std::pair<int, std::string>> ids;  // in TODO order (04.7 before 04.10), not file order
      for (const RegionInfo& r : lab.build.regions) {
        const auto& files = lab.parts[k].sources;
        if (std::find(files.begin(), files.end(), fs::path(r.file).filename().string()) != files.end()) {
          ids.emplace_back(std::stoi(r.id.substr(r.id.find('.') + 1)), r.id);
        }
      }
      std::sort(ids.begin(), ids.end());
      std::string todos;
      for (const auto& [minor, id] : ids) todos += (todos.empty() ? "" : " ") + id;
      std::cout << "      part " << k + 1 << "  " << lab.parts[k].title << (todos.empty() ? "" : " (TODO " + todos + ")") << ": ./gpulab grade "
                << lab.number << " --part " << k + 1 << "\n";
    }
    if (lab.distributed()) {
      const auto widths = [](const std::vector<int>& w) {
        std::string text;
        for (std::size_t i = 0; i < w.size(); ++i) text += (i == 0 ? "" : i + 1 == w.size() ? " and " : ", ") + std::to_string(w[i]);
        return text;
      };
      std::cout << "      ranks   every case at W = " << widths(lab.mpi_ranks) << ", performance at W = " << widths(lab.perf_ranks)
                << " (lab.json; --ranks N picks one)\n";
    }
    std::cout << "      grade   ./gpulab grade " << lab.number << (lab.parts.empty() ? "" : "   (every part)") << "\n";
  }
  // Labs the curriculum announces that have no lab.json yet: "## 10 — Tensor parallel (planned)".
  const fs::path curriculum = paths.root / "curriculum.md";
  std::string planned;
  if (fs::exists(curriculum)) {
    static const std::regex heading(R"(^## (\d\d) — (.*) \(planned\)\s*$)");
    std::istringstream in(read_text(curriculum));
    std::smatch m;
    for (std::string line; std::getline(in, line);) {
      if (std::regex_match(line, m, heading)) planned += "      " + m[1].str() + "  " + m[2].str() + "\n";
    }
  }
  if (!planned.empty()) std::cout << "  Planned (in curriculum.md, not yet here):\n" << planned;
  return 0;
}

int start(const Paths& paths) {
  std::cout << "Welcome to gpulab: GPU programming and distributed training, one lab at a time.\n\n";
  if (doctor(paths, /*brief=*/true) == 1) return 1;
  std::cout << '\n';
  list_labs(paths);
  std::cout << "\nGrading lab 01 as it is in labs/01-hello-kernel (the unmodified skeleton fails: that is where you start).\n\n";
  GradeOptions g;
  g.lab = "01";
  const GradeResult r = grade(paths, g);
  if (!r.lab.empty()) record_progress(paths, r, "01");  // as `grade 01` would: list and next show it
  std::cout << "\nNext: read lessons/01-hello-kernel.md and fill in the TODOs in labs/01-hello-kernel/hello.cu.\n";
  if (r.not_run_reason.empty()) {
    std::cout << "Run ./gpulab grade 01 until every line says PASS.\n";
  } else {
    std::cout << "This machine has no GPU (" << r.not_run_reason << "). What you can finish here:\n"
                 "  - every [cpu] check, for real (PASS/FAIL);\n"
                 "  - every [gpu] correctness check on the CPU emulator (EMU ok/EMU FAIL): your kernels' logic, indices,\n"
                 "    bounds and barriers, never their speed; an EMU FAIL is a real failure.\n"
                 "What needs a GPU: the GPU run of those checks and every speed check (N/A here). Work until nothing\n"
                 "says FAIL (the grade then exits 2: nothing failed, some checks could not run), then grade on a GPU.\n";
  }
  return r.exit_code;
}

int grade_and_record(const Paths& paths, const GradeOptions& options, bool plot) {
  const GradeResult result = grade(paths, options);
  if (plot && !result.lab.empty()) write_charts(result.to_json(), paths.build / "grade" / result.lab.substr(0, 2));
  // Progress is the learner's own copy, graded whole (every case, every width).
  if (options.submission.empty() && !options.solutions && options.cases.empty() && options.ranks.empty() && !result.lab.empty()) {
    const std::optional<LabConfig> lab = find_lab(paths, result.lab);
    record_progress(paths, result, result.lab.substr(0, 2), options.part, lab ? static_cast<int>(lab->parts.size()) : 0);
  } else if (!result.lab.empty() && !options.solutions && options.submission.empty()) {
    std::cout << "  partial grade (" << (options.cases.empty() ? "--ranks" : options.ranks.empty() ? "--case" : "--case and --ranks")
              << "): not recorded in your progress; ./gpulab grade " << result.lab.substr(0, 2) << " grades it whole\n";
  }
  return result.exit_code;
}

int run_sync(const Paths& paths, bool check, bool force) {
  const SyncReport r = sync_labs(paths, discover_labs(paths), check, force);
  if (check) {
    for (const auto& d : r.drift) std::cout << "  drift  " << d << '\n';
    if (!r.drift.empty()) {
      std::cout << "sync --check: labs/ differs from what ./gpulab sync would write from solutions/\n";
      return 1;
    }
    std::cout << "sync --check: labs/ matches solutions/ (" << r.unchanged.size() << " files)\n";
    return 0;
  }
  for (const auto& f : r.written) std::cout << "  wrote      labs/" << f << '\n';
  for (const auto& f : r.backed_up) std::cout << "  saved your version as " << f << '\n';
  for (const auto& f : r.refused) std::cout << "  REFUSED    labs/" << f << "  (you changed it; --force moves your version aside first)\n";
  std::cout << "sync: " << r.written.size() << " written, " << r.unchanged.size() << " unchanged, " << r.refused.size() << " refused\n";
  return r.refused.empty() ? 0 : 1;
}

int plot_command(const std::string& scorecard, const std::string& out_dir) {
  const auto j = nlohmann::json::parse(read_text(scorecard));
  return write_charts(j, out_dir.empty() ? fs::absolute(scorecard).parent_path() : fs::path(out_dir)) ? 0 : 2;
}

int docs_command(const Paths& paths) {
  const BuildResult b = build_targets(paths, {"docs"});
  if (!b.ok) {
    // Doxygen writes its warnings to a log file (WARN_LOGFILE), not to the build's output.
    const fs::path log = paths.build / "docs" / "warnings.log";
    const std::string warnings = fs::exists(log) ? read_text(log) : std::string();
    std::cout << b.output << warnings << "\ngpulab docs: the site did not build"
              << (b.output.find("not installed") != std::string::npos ? ": Doxygen is not installed (apt-get install doxygen)"
                                                                  : " (warnings are errors: see above)") << '\n';
    return 1;
  }
  // Doxygen's warnings catch broken references, not markdown it rendered otherwise than GitHub:
  // every page made from a .md file is read back for that (docs_problems).
  const fs::path html = paths.build / "docs" / "html";
  std::size_t pages = 0, found = 0;
  for (const auto& entry : fs::directory_iterator(html)) {
    const std::string name = entry.path().filename().string();
    if (name != "index.html" && (name.rfind("md-", 0) != 0 || entry.path().extension() != ".html")) continue;
    ++pages;
    for (const std::string& problem : docs_problems(read_text(entry.path()))) {
      std::cout << "  " << name << ": " << problem << '\n';
      ++found;
    }
  }
  if (found > 0) {
    std::cout << "gpulab docs: " << found << " rendering problem(s) in " << html.string()
              << " (fix the markdown, or the rewrite in tools/gpulab/docs/docs.cpp)\n";
    return 1;
  }
  std::cout << "gpulab docs: " << (html / "index.html").string() << " (" << pages << " pages from markdown, rendered as written)\n";
  return 0;
}

int gpu_plan_command(const Paths& paths) {
  std::vector<LabConfig> labs = discover_labs(paths);
  // The order of risk: the labs that state theirs first (1 first), then the others by number.
  std::stable_sort(labs.begin(), labs.end(), [](const LabConfig& a, const LabConfig& b) {
    const int ra = a.gpu_check.risk > 0 ? a.gpu_check.risk : 1000, rb = b.gpu_check.risk > 0 ? b.gpu_check.risk : 1000;
    return ra < rb;
  });
  for (const LabConfig& lab : labs) {
    if (lab.gpu_check.sass) std::cout << "sass\t" << lab.number << '\t' << lab.slug << '\n';
    std::vector<GpuGrade> grades = lab.gpu_check.grades;
    if (grades.empty()) grades.push_back({"grade-" + lab.number + "-solutions", {}, {}, 1});
    for (const GpuGrade& g : grades) {
      std::string env, args;
      for (const auto& [key, value] : g.env) env += (env.empty() ? "" : " ") + key + "=" + value;
      for (const std::string& a : g.args) args += (args.empty() ? "" : "\x1f") + a;
      for (int run = 1; run <= g.repeat; ++run) {
        const std::string name = g.repeat > 1 ? g.name + "-run" + std::to_string(run) : g.name;
        std::cout << "grade\t" << lab.number << '\t' << name << '\t' << (env.empty() ? "-" : env) << '\t' << (args.empty() ? "-" : args) << '\n';
      }
    }
  }
  return 0;
}

int doc_filter(const std::string& file) {
  std::cout << doxygen_markdown(read_text(file), file);
  return 0;
}

int render_command(const std::string& mode, const std::string& region, const std::string& slug, const std::string& input,
                   const std::string& output) {
  if (mode == "mutant" && region.empty()) throw std::invalid_argument("render --mode mutant needs --region");
  write_text_if_changed(output, render(read_text(input), input, slug, mode == "mutant" ? region : ""));
  return 0;
}

int emu_transform_command(const std::string& input, const std::string& output) {
  write_text_if_changed(output, emulator_source(read_text(input), input));
  return 0;
}

}  // namespace gpulab::cli
