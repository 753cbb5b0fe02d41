/// @file symbols.hpp
/// @brief What the learner's object files may define and call, read from `nm -C`.
///
/// The learner's code lives in its lab's namespace and nowhere else. A global symbol the
/// learner's objects define must be
///   - in `labNN::` (functions, kernels' host stubs, their lambdas, statics, typeinfo and vtables
///     of the lab's types), or emitted by the compiler for them (DW.ref.*, __device_stub__ of a
///     labNN kernel);
///   - or, when weak (inline and template code instantiated in the object): in `std::`, or code of
///     the grader's headers (gpulab::, emu::) that the grader's own objects do not define strongly,
///     or emitted by the reference's objects too.
/// A definition that could replace the grader's or the runtime's (anything the grader's build
/// defines strongly, and `main`, `Catch::`, `MPI_`/`PMPI_`, `ompi_`, `nccl`, `cuda`, `cu*`) fails,
/// whatever its binding. So do calls to process control, the loader and the environment (exit,
/// _exit, quick_exit, fork, exec*, system, popen, dlopen, dlsym, kill, ptrace, syscall, setenv,
/// putenv, environ, ...) that the reference's objects do not make.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace gpulab::cli {

/// One line of `nm -C`.
struct NmSymbol {
  char type = ' ';   ///< T, D, B, R, W, V, U, u, t, ...
  std::string name;  ///< demangled
  bool defined() const { return type != 'U' && type != 'w' && type != 'v'; }
  bool global() const { return type == 'u' || (type >= 'A' && type <= 'Z'); }
  bool weak() const { return type == 'W' || type == 'V' || type == 'u'; }
};

/// Parses `nm -C` output ("<address or spaces> <type> <name>").
std::vector<NmSymbol> parse_nm(const std::string& nm_output);

/// What the rules compare against.
struct SymbolContext {
  std::string lab_number;                ///< "01": the namespace is lab01
  std::set<std::string> grader_strong;   ///< strong definitions of the grader's build (tests, libgpulab, main)
  std::set<std::string> reference_weak;  ///< weak definitions the reference's objects emit
  std::set<std::string> reference_calls; ///< undefined symbols the reference's objects use
};

/// The rule @p s breaks, as a scorecard line ("defines gpulab::compare_within(...), which belongs to
/// the grader"), or "" when it breaks none.
std::string symbol_problem(const NmSymbol& s, const SymbolContext& context);

/// The process-control, loader and environment calls the rules forbid (exit, fork, dlopen, ...).
const std::set<std::string>& forbidden_calls();

}  // namespace gpulab::cli
