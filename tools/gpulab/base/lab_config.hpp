/// @file lab_config.hpp
/// @brief One lab's facts, loaded once and checked: tests/NN-slug/lab.json (what the lab is and
/// how it is graded) merged with build/labinfo/NN.json (what the build made of it).
///
/// lab.json holds everything a lab declares, and is the only place that declares it:
///
///     title            the lab's name
///     sources          the files the learner edits (solutions/NN-slug/ and labs/NN-slug/): the
///                      one file list; the build (CMake reads it), sync, hints, plants and the
///                      emulator all use it
///     timeout_s        per test case (default 120)
///     mpi_ranks        distributed labs: every case under mpirun at each W (e.g. [2, 3, 4])
///     perf_ranks       the W of the [perf] cases (default: mpi_ranks)
///     forbidden_symbols {called: [...], namespaces: [...], headers: {file: [...]}, why}: library
///                      code the learner's objects may not contain, and headers a learner file's
///                      compilation may not read
///     performance      {metric id: {min_fraction_of_reference, reference_min_fraction_of_baseline,
///                       target_basis, target_measured,
///                      hint}}: keyed by the metric a [perf] case records
///     hints            {timeout, crash}: the scorecard's hint for a hang and for a crash
///     todo_hints       {NN.k: [hint, ...]}: `gpulab hint`'s ladder per TODO
///     parts            [{title, sources, tests}]: a lab a learner finishes and is graded on in
///                      parts (`grade NN --part k`): each part's own learner files (together, every
///                      source once) and the test files whose cases grade it
///
/// An unknown key, a wrong type or a TODO id with no region is a ConfigError naming the file and
/// the key. The lesson is derived from the slug (lessons/NN-slug.md), stretch goals from the
/// [stretch] tag of the cases.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/paths.hpp"

namespace gpulab::cli {

/// A lab.json or labinfo file that does not say what it must: file, key and what is wrong.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A performance threshold, for the metric a [perf] case records.
/// One NVTX range `grade --profile` looks into (lab.json "profile").
struct ProfileSpec {
  std::string range;            ///< the NVTX range the lab's launcher opens ("softmax fused")
  std::string case_name;        ///< the case that runs it; with GPULAB_PROFILE=1 it runs it once and prints the minimum bytes
  int max_kernels = 1;          ///< kernels the range may hold
  double max_bytes_factor = 1.3;  ///< bytes moved at most this × the minimum
};

struct PerfSpec {
  double min_fraction_of_reference = 0.0;           ///< learner ≥ this × reference (same run)
  double reference_min_fraction_of_baseline = 0.0;  ///< reference ≥ this × baseline; 0: recorded only
  std::string hint;                                 ///< shown when the check fails
  /// Across a cluster with shaped links (grade --nodes N): the measured GB/s ≥ this × the link
  /// rate, for N ≤ link_gate_max_nodes (beyond, the figure is reported, not judged); 0: none.
  double min_fraction_of_link = 0.0;
  int link_gate_max_nodes = 0;
  /// What the reference's target rests on ("measured on an H200 ...", "predicted from ..."); with
  /// target_measured false the scorecard states the target as unmeasured, with this basis.
  std::string target_basis{};
  bool target_measured = true;
};

/// How a grade turns into points (lab.json "points", every key optional; grade/points.hpp applies
/// it): each correctness, structure or sanitizer check is worth `correctness`, each performance
/// check `performance`, earned in full at its threshold, not at all at `performance_floor` × the
/// threshold or below, linearly between; `cases` overrides a case's points or visibility (by the
/// case's name, every width W of it). Visibility is Gradescope's: visible, hidden, after_due_date,
/// after_published.
struct CasePoints {
  double points = -1.0;    ///< < 0: the kind's default
  std::string visibility;  ///< "": the lab's
};
struct Points {
  double correctness = 1.0;
  double performance = 2.0;
  double performance_floor = 0.5;
  std::string visibility = "visible";
  std::map<std::string, CasePoints> cases;
};

/// Library code the learner's objects may not contain (found with nm).
struct ForbiddenSymbols {
  std::vector<std::string> called;      ///< undefined symbols containing one of these (a call into a library)
  std::vector<std::string> namespaces;  ///< any symbol of these namespaces (header-only code instantiated)
  std::string why;                      ///< the scorecard's hint
  /// Per learner file: headers its compilation may not read (the build's own record of what it
  /// read), for what is inline and bit-exact in a header, so that no symbol and no result shows
  /// it (lab 04: CUDA's host conversions in formats.cpp).
  std::map<std::string, std::vector<std::string>> headers;
};

/// A part of a lab (lab.json "parts"): what a learner can finish and be graded on alone.
struct LabPart {
  std::string title;
  std::vector<std::string> sources;  ///< its learner files (the parts partition the lab's sources)
  std::vector<std::string> tests;    ///< the files in tests/NN-slug/ whose cases grade it
};

/// How the build makes a lab (lab.json "build"), read by cmake/GpulabLab.cmake through lab-scan
/// (base/lab_scan.cpp): this parser is the only one.
struct LabTargets {
  std::vector<std::string> tests;         ///< the test sources in tests/NN-slug/
  std::vector<std::string> libraries;     ///< what the lab and its tests link (kLabLibraries)
  std::string main = "cuda";              ///< the test main: "cuda" (one process) or "mpi" (one per rank)
  bool emulator = false;                  ///< also built for the CPU block emulator (a kernel lab)
  std::vector<std::string> emu_sources;   ///< the emulated part: these sources (empty: all)
  std::vector<std::string> emu_tests;     ///< ... judged by these tests (empty: all)
  std::vector<std::string> assemble_for;  ///< more CUDA architectures the reference's .cu files must assemble for
};

/// One reference grade of the GPU proof (lab.json "gpu_check.grades"; scripts/gpu-check runs it).
struct GpuGrade {
  std::string name;                          ///< its scorecard's name in the proof's folder
  std::vector<std::string> args;             ///< `gpulab grade NN --solutions` options beyond the proof's own
  std::map<std::string, std::string> env;    ///< environment for the grade (GPULAB_DIST_BACKEND)
  int repeat = 1;                            ///< times in a row (each named NAME-runK when > 1)
};

/// The lab's part of the GPU proof (lab.json "gpu_check"): where it falls in the order of risk,
/// what it grades. A lab without it is graded whole, after the ones that have it.
struct GpuCheck {
  int risk = 0;                 ///< 1 runs first; 0: after every lab that has one, by number
  bool sass = false;            ///< print the architectures in labNN_ref's SASS first
  std::vector<GpuGrade> grades; ///< empty: one grade, "grade-NN-solutions"
};

/// The libraries a lab may link (lab.json "build.libraries"): CMake targets the project defines.
inline const std::vector<std::string> kLabLibraries = {"CUDA::cublas", "gpulab_nn", "gpulab_dist", "gpulab_cublas_on_demand"};

/// One executable the build makes for a lab.
struct Variant {
  std::string target;                    ///< CMake target of the executable
  std::string exe;                       ///< its path
  std::vector<std::string> compile;      ///< targets that compile the variant's own sources
  std::vector<std::string> objects;      ///< the object files of those sources
};

/// A SOLUTION region, as the build found it.
struct RegionInfo {
  std::string id;    ///< "03.2"
  std::string file;  ///< the source it is in
};

/// What build/labinfo/NN.json says (written by gpulab_add_lab at configure and generate time).
struct BuildInfo {
  bool configured = false;  ///< the file exists
  bool buildable = false;   ///< the lab's dependencies are here
  std::string reason;       ///< why not, when not buildable
  fs::path submission_dir;  ///< the snapshot `grade --submission` copies into
  std::map<std::string, Variant> variants;  ///< ref, lab, sub, skeleton, and emu_* where emulated
  std::map<std::string, Variant> mutants;   ///< by region id
  std::map<std::string, Variant> emu_mutants;  ///< by region id, where emulated
  std::vector<RegionInfo> regions;          ///< in source order
  std::vector<std::string> grader_files;    ///< the reference's executable, the test objects, libgpulab
  const Variant* variant(const std::string& name) const;
  bool emulated() const { return variants.count("emu_ref") != 0; }
};

/// One lab: its folders, lab.json, and (when configured) the build's view of it.
struct LabConfig {
  std::string number;  ///< "01"
  std::string slug;    ///< "01-hello-kernel"
  std::string title;
  fs::path solutions, labs, tests, lesson;
  std::vector<std::string> sources;
  double timeout_s = 120.0;
  std::vector<int> mpi_ranks, perf_ranks;
  ForbiddenSymbols forbidden;
  std::map<std::string, PerfSpec> performance;
  std::vector<ProfileSpec> profile;
  std::string timeout_hint, crash_hint;
  std::map<std::string, std::vector<std::string>> todo_hints;
  std::vector<LabPart> parts;  ///< empty: the lab is graded whole
  LabTargets targets;          ///< how the build makes it (lab.json)
  GpuCheck gpu_check;          ///< its part of the GPU proof (lab.json)
  Points points;               ///< how a grade turns into points (lab.json "points")
  BuildInfo build;             ///< what the build made (labinfo)

  bool distributed() const { return !mpi_ranks.empty(); }
  /// Part k (from 1) of this lab, or nullptr.
  const LabPart* part(int k) const { return k >= 1 && k <= static_cast<int>(parts.size()) ? &parts[static_cast<std::size_t>(k - 1)] : nullptr; }
};

/// Parses lab.json text (@p where names it in errors). Checks keys and types, not the tree.
LabConfig parse_lab_json(const std::string& text, const std::string& where);
/// lab.json's "points" object (@p where names it in errors); throws ConfigError.
Points parse_points(const nlohmann::json& points, const std::string& where);
/// Parses labinfo JSON text.
BuildInfo parse_labinfo(const std::string& text, const std::string& where);

/// Lab @p slug ("01-hello-kernel") of the tree at @p root: tests/SLUG/lab.json parsed and checked
/// against the tree (sources present, todo_hints naming regions that exist, build.tests present),
/// without what the build wrote. Throws ConfigError naming the file and the key.
LabConfig load_lab(const fs::path& root, const std::string& slug);
/// Every lab with a folder in solutions/, in order, each loaded and checked (sources present,
/// todo_hints naming regions that exist) with its labinfo when the build tree has one.
std::vector<LabConfig> discover_labs(const Paths& paths);
/// The lab named by "1", "01" or "01-hello-kernel"; nullopt if none.
std::optional<LabConfig> find_lab(const Paths& paths, const std::string& name);

/// The test cases the reference's build listed (build/labinfo/NN-cases.txt: kind, name, tags).
struct CaseInfo {
  std::string where;  ///< cpu or gpu
  std::string name;
  std::string tags;   ///< "[gpu][perf][03.2]"
  std::string file;   ///< the test file that defines it ("test_gemm.cpp"), where the listing says
  bool has_tag(const std::string& tag) const { return tags.find("[" + tag + "]") != std::string::npos; }
  bool perf() const { return has_tag("perf"); }
  /// Whether the case measures time: a speed case ([perf]) or a timed comparison ([timing]). Such a
  /// case asks nothing of a sanitizer or an emulator, whose slowdown would only fail it.
  bool measures() const { return perf() || has_tag("timing"); }
  bool stretch() const { return has_tag("stretch"); }
  /// The TODO ids among the tags ("03.2"), for the lab @p number.
  std::vector<std::string> todos(const std::string& number) const;
};
/// Parses `--gpulab-list` output: one case per line, "kind<TAB>name<TAB>tags[<TAB>file]".
std::vector<CaseInfo> parse_case_list(const std::string& listing);
/// The cases --case @p name picks: the one of exactly that name, else those whose name holds
/// @p name, ignoring case ("bubble" picks every bubble case).
std::vector<CaseInfo> cases_named(const std::vector<CaseInfo>& cases, const std::string& name);
/// The cases the reference's last build listed (build/labinfo/NN-cases.txt); empty before it.
std::vector<CaseInfo> listed_cases(const Paths& paths, const LabConfig& lab);
/// The part (from 1) of @p lab whose test files hold @p c; 0 when the lab has no parts or none does.
int part_of(const LabConfig& lab, const CaseInfo& c);
/// The TODOs whose every case is a [stretch] case: stretch goals, shown and never counted.
std::vector<std::string> stretch_todos(const LabConfig& lab, const std::vector<CaseInfo>& cases);

}  // namespace gpulab::cli
