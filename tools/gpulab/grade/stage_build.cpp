/// @file stage_build.cpp
/// @brief The sources and build stages: the submission's files, a snapshot of them, compiling the
/// learner's objects, forbidden library code in them (nm), linking with the tests; and the
/// emulator's build, which the correctness stage asks for when a chosen case runs on it.
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "grade/build.hpp"
#include "grade/grade_stages.hpp"
#include "grade/symbols.hpp"
#include "run/cluster.hpp"

namespace gpulab::cli {
namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Builds @p targets; the check carries the compiler's own messages, with the learner's paths.
Check build_check(const GradeInputs& in, const std::string& what, const std::vector<std::string>& targets) {
  const auto t0 = std::chrono::steady_clock::now();
  const BuildResult b = build_targets(in.paths, targets, false, in.options.quiet ? "" : "lab " + in.lab.number + " (" + what + ")");
  Check c;
  c.name = what;
  c.kind = Kind::kBuild;
  c.status = b.ok ? Status::kPass : Status::kFail;
  c.seconds = since(t0);
  if (!b.ok) {
    std::vector<std::pair<std::string, std::string>> rewrite;
    if (in.sources == Sources::kSubmission) rewrite.emplace_back(in.compiled_dir.string(), in.source_dir.string());
    std::istringstream diag(extract_diagnostics(b.output, rewrite));
    for (std::string line; std::getline(diag, line);) c.details.push_back(line);
    c.hints.push_back("fix the first error first: later ones often follow from it");
  }
  return c;
}

/// What @p command prints about @p file, remembered for as long as the file keeps its size and
/// time stamp: selftest grades dozens of submissions in one process, and each grade reads the
/// same reference objects and executable (nm of a test executable takes a tenth of a second).
std::string tool_output(const std::vector<std::string>& command, const std::string& file) {
  struct Entry {
    fs::file_time_type written;
    std::uintmax_t size = 0;
    std::string output;
  };
  static std::map<std::vector<std::string>, Entry> memo;
  std::error_code ec;
  const fs::file_time_type written = fs::last_write_time(file, ec);
  const std::uintmax_t size = ec ? 0 : fs::file_size(file, ec);
  if (!ec) {
    const auto it = memo.find(command);
    if (it != memo.end() && it->second.written == written && it->second.size == size) return it->second.output;
  }
  ProcessOptions o;
  o.timeout_s = 60;
  const ProcessResult r = run_process(command, o);
  if (!ec && r.exited(0)) memo[command] = {written, size, r.output};
  return r.output;
}

std::string nm_of(const std::string& object) { return tool_output({"nm", "-C", object}, object); }

/// The disassembly with relocations (@p code), or every section's relocations.
std::string objdump_of(const std::string& object, bool code) {
  return tool_output(code ? std::vector<std::string>{"objdump", "-d", "-r", "-C", "--no-show-raw-insn", object}
                          : std::vector<std::string>{"objdump", "-r", "-C", object},
                     object);
}

/// The functions @p object has run before main or at exit, less <iostream>'s initializer.
int own_startup_entries(const std::string& object) {
  int entries = startup_entries(tool_output({"objdump", "-h", object}, object));
  for (const ObjectFunction& f : parse_objdump(objdump_of(object, true))) entries -= iostream_initializer_only(f) ? 1 : 0;
  return entries;
}

/// Library code the lab forbids, in the learner's objects.
void check_forbidden(const GradeInputs& in, Scorecard& card) {
  const ForbiddenSymbols& rules = in.lab.forbidden;
  if (rules.called.empty() && rules.namespaces.empty() && rules.headers.empty()) return;
  std::vector<std::string> hits;
  for (const std::string& obj : in.build().objects) {
    for (const std::string& h : forbidden_in_nm(nm_of(obj), rules)) hits.push_back("your code contains " + h);
    // Headers a file may not read (inline code leaves no symbol): from the build's own record.
    const std::string name = fs::path(obj).filename().string();
    for (const auto& [file, headers] : rules.headers) {
      if (name != file + ".o") continue;
      for (const std::string& read : object_inputs(in.paths, obj)) {
        for (const std::string& h : headers) {
          if (fs::path(read).filename().string().rfind(h, 0) == 0) hits.push_back(file + " reads " + read + ", which this lab forbids in it");
        }
      }
    }
  }
  Check c;
  c.name = "no forbidden library calls";
  c.kind = Kind::kStructure;
  c.status = hits.empty() ? Status::kPass : Status::kFail;
  for (const auto& h : hits) {
    if (c.details.size() < 5) c.details.push_back(h);
  }
  if (!hits.empty()) c.hints.push_back(rules.why);
  card.add(c);
}

}  // namespace

std::set<std::string> symbol_problems(const std::string& lab_number, const Variant& learner, const Variant& reference, const fs::path& source_dir) {
  SymbolContext rules;
  rules.lab_number = lab_number;
  std::set<std::string> reference_defined;
  for (const std::string& obj : reference.objects) {
    for (const NmSymbol& s : parse_nm(nm_of(obj))) {
      if (s.type == 'U') rules.reference_calls.insert(s.name);
      if (s.defined() && s.weak()) rules.reference_weak.insert(s.name);
      if (s.defined()) reference_defined.insert(s.name);
    }
  }
  // The grader's strong definitions: everything the reference's executable defines that its own
  // lab objects do not (the tests, libgpulab, the test runner, the runtime linked in).
  for (const NmSymbol& s : parse_nm(nm_of(reference.exe))) {
    if (s.defined() && s.global() && !s.weak() && !reference_defined.count(s.name)) rules.grader_strong.insert(s.name);
  }
  // What the reference's objects have of what nm cannot show, by file: kernel entries and
  // functions run before main or at exit (one per file that has namespace-scope constructors;
  // nvcc's registration of the kernels is one in every .cu object).
  std::set<std::string> reference_entries;
  std::map<std::string, int> reference_startup;
  for (const std::string& obj : reference.objects) {
    for (const std::string& e : kernel_entries(objdump_of(obj, true))) reference_entries.insert(e.substr(0, e.find(' ')));
    reference_startup[fs::path(obj).filename().string()] = own_startup_entries(obj);
  }
  std::set<std::string> problems;
  for (const std::string& obj : learner.objects) {
    const std::string file = fs::path(obj).filename().string();
    for (const std::string& e : kernel_entries(objdump_of(obj, true))) {
      if (reference_entries.count(e.substr(0, e.find(' ')))) continue;
      problems.insert("enters the kernel directly (" + e + "): system calls go through the C library, and the process is the grader's");
    }
    const int startup = own_startup_entries(obj), allowed = reference_startup[file];
    if (startup > allowed) {
      problems.insert("has code run before main or at exit in " + fs::path(obj).stem().string() + " (" + std::to_string(startup) +
                      " start-up functions, the reference's " + std::to_string(allowed) +
                      "): a namespace-scope object with a constructor; make a table constexpr, or build it inside the function that uses it");
    }
    const bool cuda_object = obj.size() > 5 && obj.compare(obj.size() - 5, 5, ".cu.o") == 0;
    const fs::path source = source_dir / fs::path(obj).stem();  // hgemm.cu.o → hgemm.cu
    std::optional<std::vector<ObjectFunction>> functions;  // disassembled only when a call needs judging
    std::set<std::string> data_refs;
    for (const NmSymbol& s : parse_nm(nm_of(obj))) {
      const std::string p = symbol_problem(s, rules);
      if (p.empty()) continue;
      // A call made only by nvcc's host stubs of __device__ functions is the compiler's, not the learner's.
      if (s.type == 'U' && cuda_object && fs::is_regular_file(source)) {
        if (!functions) {
          functions = parse_objdump(objdump_of(obj, true));
          data_refs = data_references(objdump_of(obj, false));
        }
        if (only_device_stubs_reference(*functions, data_refs, read_text(source), s.name)) continue;
      }
      problems.insert(p);
    }
  }
  return problems;
}

void check_symbols(const GradeInputs& in, Scorecard& card, const Variant& learner, const Variant& reference) {
  const std::set<std::string> problems = symbol_problems(in.lab.number, learner, reference, in.compiled_dir);
  Check c;
  c.name = "your code stays in lab" + in.lab.number + "::";
  c.kind = Kind::kStructure;
  c.status = problems.empty() ? Status::kPass : Status::kFail;
  for (const auto& p : problems) {
    if (c.details.size() < 6) c.details.push_back("your code " + p);
  }
  if (!problems.empty()) {
    c.hints.push_back("a lab's code defines only its own functions (in namespace lab" + in.lab.number +
                      ") and leaves the process, the environment and the test runner to the grader");
  }
  card.add(c);
}

std::vector<std::string> forbidden_in_nm(const std::string& nm_output, const ForbiddenSymbols& rules) {
  // `nm -C` prints "<16 hex digits or spaces> <type> <name>"; type U is a symbol used but defined
  // elsewhere (a call into a library). Namespaces match any symbol: header-only templates are
  // instantiated in the object itself.
  std::set<std::string> found;
  std::istringstream in(nm_output);
  for (std::string line; std::getline(in, line);) {
    if (line.size() <= 19) continue;
    const bool undefined = line[17] == 'U';
    const std::string name = line.substr(19);
    for (const std::string& pat : rules.called) {
      if (undefined && name.find(pat) != std::string::npos) found.insert("a call to " + name);
    }
    for (const std::string& ns : rules.namespaces) {
      const std::size_t at = name.find(ns);
      if (at != std::string::npos && (at == 0 || name[at - 1] == ' ' || name[at - 1] == '<' || name[at - 1] == '(')) {
        found.insert("code from " + ns + " (" + name.substr(0, 80) + (name.size() > 80 ? "...)" : ")"));
        break;
      }
    }
  }
  return {found.begin(), found.end()};
}

void prepare_emulator(const GradeInputs& in, Built& built, Scorecard& card) {
  const Variant* emu = in.lab.build.variant("emu_" + in.variant);
  const Variant* emu_ref = in.lab.build.variant("emu_ref");
  if (emu == nullptr || emu_ref == nullptr) return;
  const BuildResult b = build_targets(in.paths, {emu->target, emu_ref->target});
  if (!b.ok) {
    std::istringstream diag(extract_diagnostics(b.output));
    std::getline(diag, built.emulator_problem);
    built.emulator_problem = "the emulator's build of your code failed: " + built.emulator_problem;
    return;
  }
  if (!in.graded_is_reference()) {
    std::ostringstream unused;
    Scorecard quiet(true, &unused);
    check_symbols(in, quiet, *emu, *emu_ref);
    for (Check c : quiet.checks()) {
      if (c.status != Status::kFail) continue;
      c.name += " (the emulator's build)";
      card.add(c);
      return;  // the emulated runs would measure code that breaks the rules: not run
    }
  }
  built.emulator = "emu_" + in.variant;
  built.emu_profile = ReferenceProfile(in.paths.build / "grade" / "profiles" / (in.lab.number + "-emu.json"), file_hash(emu_ref->exe));
}

bool stage_sources(const GradeInputs& in, Scorecard& card) {
  if (in.sources != Sources::kSubmission) return true;
  std::string missing;
  for (const std::string& f : in.lab.sources) {
    if (!fs::is_regular_file(in.source_dir / f)) missing += " " + f;
  }
  if (!fs::is_directory(in.source_dir) || !missing.empty()) {
    card.add(Check::failure("submission files", Kind::kBuild,
                            fs::is_directory(in.source_dir) ? "missing:" + missing : in.source_dir.string() + " is not a folder",
                            "a submission folder holds the same file names as labs/" + in.lab.slug));
    return false;
  }
  // Snapshot into the build tree; only changed files are rewritten, so an unchanged submission
  // is not recompiled.
  for (const std::string& f : in.lab.sources) {
    const std::string text = read_text(in.source_dir / f);
    const fs::path copy = in.compiled_dir / f;
    if (!fs::exists(copy) || read_text(copy) != text) write_text(copy, text);
  }
  return true;
}

std::optional<Built> stage_build(const GradeInputs& in, LearnerRuns& runs, Scorecard& card) {
  if (in.lab.build.variant(in.variant) == nullptr) {
    card.add(Check::failure("sources", Kind::kBuild, "labs/" + in.lab.slug + " is missing files, so the build left this lab's learner targets out",
                            "restore the folder with `git checkout labs/" + in.lab.slug + "` (or, instructors, `./gpulab sync`)"));
    return std::nullopt;
  }
  // The grader's own build first (the tests, libgpulab and the reference, which lists the cases
  // and is the yardstick; on a first build, most of the work): its progress comes before any
  // verdict on the learner's code, so no "PASS compile" stands above minutes of building.
  if (!in.graded_is_reference()) {
    Check reference = build_check(in, "build the tests and the reference", {in.reference().target});
    if (reference.status == Status::kFail) {
      card.add(reference);
      return std::nullopt;
    }
  }
  // Then the learner's objects alone, before they are linked: a forbidden library call is then
  // reported as such, not as the link error it may also cause, and their symbols are measured
  // against the reference's.
  Check compiled = build_check(in, "compile", in.build().compile);
  card.add(compiled);
  if (compiled.status == Status::kFail) return std::nullopt;
  if (!in.graded_is_reference()) {
    check_forbidden(in, card);
    check_symbols(in, card, in.build(), in.reference());
  }
  Check linked = build_check(in, "link with the tests", {in.build().target});
  card.add(linked);
  if (linked.status == Status::kFail) return std::nullopt;
  // Across a cluster the reference takes longer (TCP): its own profile, so that local limits stay tight.
  // Keyed by the cluster's own link rate (as `cluster up` made it), --link-rate given or not.
  const std::string rate = in.options.nodes > 0 ? saved_cluster(in.paths).link_rate : "";
  const std::string where = in.options.nodes > 0 ? "-nodes" + std::to_string(in.options.nodes) + "-" + (rate.empty() ? "unshaped" : rate) : "";
  Built built;
  built.profile = ReferenceProfile(in.paths.build / "grade" / "profiles" / (in.lab.number + where + ".json"), file_hash(in.reference().exe));
  built.gpu_missing = device_missing(in.reference().exe);
  runs.arm(in);
  if (const std::string missing = runs.confinement().missing(); !missing.empty()) {
    // Said before any learner process runs, and kept in the JSON ("confinement").
    Check c;
    c.name = missing;
    c.kind = Kind::kIntegrity;
    c.where = Where::kNone;
    c.status = Status::kInfo;
    c.details.push_back("the code under test runs with less isolation than a full grade gives it: its verdicts may be forged");
    card.add(c);
  }
  return built;
}

}  // namespace gpulab::cli
