/// @file symbols.cpp
/// @brief The learner's symbols, confined to its lab (see symbols.hpp).
#include "symbols.hpp"

#include <sstream>

namespace gpulab::cli {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

/// The qualified name of a demangled symbol: without "typeinfo for" and the like, without a
/// function's parameters and a template function's return type.
std::string qualified_name(std::string name) {
  for (const char* prefix : {"typeinfo for ", "typeinfo name for ", "vtable for ", "VTT for ", "construction vtable for ",
                             "guard variable for ", "non-virtual thunk to ", "virtual thunk to ", "covariant return thunk to ",
                             "transaction clone for ", "TLS init function for ", "TLS wrapper function for "}) {
    if (starts_with(name, prefix)) name = name.substr(std::string(prefix).size());
  }
  if (starts_with(name, "reference temporary #")) name = name.substr(name.find(" for ") == std::string::npos ? 0 : name.find(" for ") + 5);
  int depth = 0;
  std::size_t last_space = std::string::npos, end = name.size();
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '<') ++depth;
    if (c == '>') --depth;
    if (depth == 0 && c == '(') {
      end = i;
      break;
    }
    if (depth == 0 && c == ' ') last_space = i;
  }
  const std::size_t begin = last_space == std::string::npos || last_space > end ? 0 : last_space + 1;
  return name.substr(begin, end - begin);
}

bool in_lab(const std::string& name, const std::string& number) {
  const std::string ns = "lab" + number + "::";
  if (starts_with(qualified_name(name), ns)) return true;
  // nvcc's host stub of a kernel: __device_stub__ + the kernel's mangled name (N5lab01...).
  return starts_with(name, "__device_stub__") && name.find("5lab" + number) != std::string::npos;
}

bool compiler_emitted(const std::string& name) {
  for (const char* prefix : {"DW.ref.", "__nv_", "_GLOBAL__", "__fatbinwrap", "__sti__"}) {
    if (starts_with(name, prefix)) return true;
  }
  return false;
}

/// Names that would replace the runtime's, the MPI library's or the test runner's.
bool reserved(const std::string& name) {
  const std::string q = qualified_name(name);
  if (q == "main" || q == "_start") return true;
  for (const char* prefix : {"Catch::", "MPI_", "PMPI_", "ompi_", "mpi_", "nccl", "cuda", "__cuda", "cublas", "cudnn", "gpulab::testing::"}) {
    if (starts_with(q, prefix)) return true;
  }
  return q.size() > 2 && q[0] == 'c' && q[1] == 'u' && std::isupper(static_cast<unsigned char>(q[2]));  // the driver API: cuInit, ...
}

/// Weak code of the standard library or of the grader's own headers (templates, inline functions).
bool header_code(const std::string& name) {
  const std::string q = qualified_name(name);
  return starts_with(q, "std::") || starts_with(q, "__gnu_cxx::") || starts_with(q, "gpulab::") || starts_with(q, "emu::") ||
         starts_with(q, "nlohmann::");
}

std::string short_name(const std::string& name) { return name.size() > 100 ? name.substr(0, 100) + "..." : name; }

}  // namespace

std::vector<NmSymbol> parse_nm(const std::string& nm_output) {
  std::vector<NmSymbol> symbols;
  std::istringstream in(nm_output);
  for (std::string line; std::getline(in, line);) {
    if (line.size() <= 19 || line[16] != ' ' || line[18] != ' ') continue;
    symbols.push_back({line[17], line.substr(19)});
  }
  return symbols;
}

const std::set<std::string>& forbidden_calls() {
  static const std::set<std::string> calls = {
      "exit", "_exit", "_Exit", "quick_exit", "at_quick_exit", "on_exit", "fork", "vfork", "clone", "clone3", "execv", "execve",
      "execvp", "execvpe", "execl", "execle", "execlp", "fexecve", "posix_spawn", "posix_spawnp", "system", "popen", "dlopen",
      "dlmopen", "dlsym", "dlvsym", "kill", "killpg", "tgkill", "tkill", "pthread_kill", "ptrace", "syscall", "prctl", "unshare",
      "setns", "setenv", "putenv", "unsetenv", "clearenv", "environ", "__environ"};
  return calls;
}

std::string symbol_problem(const NmSymbol& s, const SymbolContext& context) {
  const std::string ns = "lab" + context.lab_number + "::";
  if (s.type == 'U') {
    const std::string q = qualified_name(s.name);
    if (forbidden_calls().count(q) && !context.reference_calls.count(s.name)) {
      return "calls " + q + ": process control, the loader and the environment are the grader's, not the lab's";
    }
    return "";
  }
  if (!s.defined() || !s.global()) return "";
  if (in_lab(s.name, context.lab_number) || compiler_emitted(s.name)) return "";
  if (context.grader_strong.count(s.name)) return "defines " + short_name(s.name) + ", which belongs to the grader: keep your code in " + ns;
  if (s.weak()) {
    if (context.reference_weak.count(s.name)) return "";
    if (reserved(s.name)) return "defines " + short_name(s.name) + ", which belongs to the runtime or the test runner";
    if (header_code(s.name)) return "";
  }
  return "defines " + short_name(s.name) + " outside " + ns + ": put it inside namespace lab" + context.lab_number +
         " (or make it static)";
}

}  // namespace gpulab::cli
