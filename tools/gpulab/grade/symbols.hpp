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
/// putenv, environ, ...) that the reference's objects do not make — unless every reference to
/// the call in the object is inside a host stub nvcc wrote for a `__device__` function (cudafe++
/// gives each such function the host body `{ int volatile ___ = 1; ::exit(___); }`, so a skeleton
/// with an empty `__device__` helper "calls exit" without a line of host code saying so). The
/// rules judge the learner's code, not what the compiler emits around it. Beyond what nm shows,
/// the learner's objects may not enter the kernel directly (a syscall instruction needs no symbol),
/// define GNU indirect functions (ifuncs: the loader runs their resolvers before main), or have
/// more functions run before main or at exit (namespace-scope objects with constructors) than
/// the reference's object of the same file.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace gpulab::cli {

/// One line of `nm -C`. Every type letter GNU nm prints is named here, and a rule treats each
/// explicitly: an unknown letter is a problem, never a pass (symbol_problem).
struct NmSymbol {
  char type = ' ';   ///< T, D, B, R, W, V, U, u, t, i, ...
  std::string name;  ///< demangled
  bool known() const { return std::string("AaBbCcDdGgIiNnpRrSsTtUuVvWw-?").find(type) != std::string::npos; }
  bool defined() const { return type != 'U' && type != 'w' && type != 'v'; }
  /// Upper case, 'u' (a unique global) and 'i' (a GNU indirect function, global or not: nm prints
  /// both as 'i', and either replaces a name at load time).
  bool global() const { return type == 'u' || type == 'i' || (type >= 'A' && type <= 'Z'); }
  bool weak() const { return type == 'W' || type == 'V' || type == 'u'; }
};

/// The qualified name of a demangled symbol: without "typeinfo for" and the like, without a
/// function's parameters and a template function's return type; "(anonymous namespace)" kept
/// ("void lab06::(anonymous namespace)::scale<float>(float*, int)" → "lab06::(anonymous
/// namespace)::scale<float>").
std::string qualified_name(std::string name);

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

/// The instructions in `objdump -d` output that enter the kernel directly, skipping the C
/// library and every symbol nm could show (x86-64 syscall, sysenter, int $0x80; AArch64 svc),
/// one line each with the function they are in: "syscall in lab01::f()".
std::vector<std::string> kernel_entries(const std::string& objdump_d_output);

/// How many functions an object has the loader run before main or at exit: the entries of its
/// .init_array, .preinit_array, .ctors, .fini_array and .dtors sections (`objdump -h`, 8 bytes each).
int startup_entries(const std::string& objdump_h_output);

struct ObjectFunction;
/// Whether @p f is a start-up function that only constructs <iostream>'s std::ios_base::Init (g++
/// before 13 gives every file that includes <iostream> one): the header's, not the learner's.
bool iostream_initializer_only(const ObjectFunction& f);

/// One function of an object's disassembly (`objdump -d -r -C --no-show-raw-insn`).
struct ObjectFunction {
  std::string name;                   ///< demangled
  int instructions = 0;
  std::set<std::string> references;   ///< the symbols its relocations name (exit, not exit-0x4)
  bool stores_one = false;            ///< it moves the constant 1 into memory (movl $0x1, ...)
};

/// Parses objdump's disassembly with relocations into functions.
std::vector<ObjectFunction> parse_objdump(const std::string& objdump_output);

/// Whether @p f is shaped like nvcc's host stub of a `__device__` function: a few instructions
/// that store 1 and pass it to exit, referencing nothing else (x86-64 and AArch64 alike).
bool is_device_function_stub(const ObjectFunction& f);

/// Whether @p source (a .cu file) declares a function named @p name `__device__` and not
/// `__host__`: nvcc writes host stubs for those only.
bool declared_device_only(const std::string& source, const std::string& name);

/// The symbols referenced from sections that hold no code (`objdump -r`: .data, .data.rel.ro,
/// ...): a function's address taken into a table is a reference no disassembly shows.
std::set<std::string> data_references(const std::string& objdump_r_output);

/// Whether every reference to @p symbol in an object is inside a host stub of a function that
/// @p source declares `__device__` (and at least one is): then the call is the compiler's.
bool only_device_stubs_reference(const std::vector<ObjectFunction>& functions, const std::set<std::string>& data_refs,
                                 const std::string& source, const std::string& symbol);

}  // namespace gpulab::cli
