/// @file symbols.cpp
/// @brief The learner's symbols, confined to its lab (see symbols.hpp).
#include "grade/symbols.hpp"

#include <algorithm>
#include <cctype>
#include <regex>
#include <sstream>

namespace gpulab::cli {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

std::string qualified_name(std::string name) {
  for (const char* prefix : {"typeinfo for ", "typeinfo name for ", "vtable for ", "VTT for ", "construction vtable for ",
                             "guard variable for ", "non-virtual thunk to ", "virtual thunk to ", "covariant return thunk to ",
                             "transaction clone for ", "TLS init function for ", "TLS wrapper function for "}) {
    if (starts_with(name, prefix)) name = name.substr(std::string(prefix).size());
  }
  if (starts_with(name, "reference temporary #")) name = name.substr(name.find(" for ") == std::string::npos ? 0 : name.find(" for ") + 5);
  // "(anonymous namespace)" is part of a name, not a parameter list.
  static const std::string anonymous = "(anonymous namespace)";
  int depth = 0;
  std::size_t last_space = std::string::npos, end = name.size();
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (name.compare(i, anonymous.size(), anonymous) == 0) {
      i += anonymous.size() - 1;
      continue;
    }
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

namespace {

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
      "exit", "_exit", "_Exit", "quick_exit", "at_quick_exit", "on_exit", "fork", "vfork", "clone", "clone3", "_Fork", "__fork",
      "__libc_fork", "__clone", "__clone2", "__clone3", "__vfork", "execv", "execve",
      "execvp", "execvpe", "execl", "execle", "execlp", "fexecve", "posix_spawn", "posix_spawnp", "system", "popen", "dlopen",
      "dlmopen", "dlsym", "dlvsym", "kill", "killpg", "tgkill", "tkill", "pthread_kill", "ptrace", "syscall", "prctl", "unshare",
      "setns", "setenv", "putenv", "unsetenv", "clearenv", "environ", "__environ"};
  return calls;
}

std::string symbol_problem(const NmSymbol& s, const SymbolContext& context) {
  const std::string ns = "lab" + context.lab_number + "::";
  if (!s.known()) return "has a symbol of a type nm calls '" + std::string(1, s.type) + "', which the grader does not know (" + short_name(s.name) + ")";
  if (s.type == 'i') {
    return "defines " + short_name(s.name) + " as a GNU indirect function (ifunc), whose resolver the loader runs before main: " +
           "write a plain function";
  }
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

std::vector<std::string> kernel_entries(const std::string& objdump_d_output) {
  static const std::regex header(R"(^[0-9a-f]+ <(.+)>:$)"), entry(R"(^\s+[0-9a-f]+:\t(syscall|sysenter|int\s+\$0x80|svc\s+#?0x0|svc\s+#0)\b.*$)");
  std::vector<std::string> found;
  std::string function = "?";
  std::istringstream in(objdump_d_output);
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_match(line, m, header)) {
      function = m[1].str();
    } else if (std::regex_match(line, m, entry)) {
      std::string what;  // "int    $0x80" → "int $0x80"
      for (const char c : m[1].str()) {
        if (c != ' ' && c != '\t') what += c;
        else if (what.back() != ' ') what += ' ';
      }
      const std::string text = what + " in " + short_name(function);
      if (std::find(found.begin(), found.end(), text) == found.end()) found.push_back(text);
    }
  }
  return found;
}

int startup_entries(const std::string& objdump_h_output) {
  // "  5 .init_array   00000008  0000000000000000  ..." (a priority makes it .init_array.00101).
  int entries = 0;
  std::istringstream in(objdump_h_output);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string index, name, size;
    if (!(fields >> index >> name >> size)) continue;
    bool runs = false;
    for (const char* section : {".init_array", ".preinit_array", ".fini_array", ".ctors", ".dtors"}) {
      runs = runs || name == section || starts_with(name, std::string(section) + ".");
    }
    if (runs) entries += static_cast<int>(std::stoul(size, nullptr, 16) / 8);
  }
  return entries;
}

bool iostream_initializer_only(const ObjectFunction& f) {
  if (!starts_with(f.name, "_GLOBAL__sub_I")) return false;
  static const std::set<std::string> allowed = {"std::ios_base::Init::Init()", "std::ios_base::Init::~Init()", "__cxa_atexit", "__dso_handle", ".bss"};
  if (f.references.empty() || !f.references.count("std::ios_base::Init::Init()")) return false;
  for (const std::string& r : f.references) {
    if (!allowed.count(r)) return false;
  }
  return true;
}

std::vector<ObjectFunction> parse_objdump(const std::string& objdump_output) {
  // "0000000000000510 <lab04::f(int)>:" starts a function; "     4f0:\tsub    $0x18,%rsp" is an
  // instruction; "\t\t\t501: R_X86_64_PLT32\texit-0x4" a relocation inside the one before.
  static const std::regex header(R"(^[0-9a-f]+ <(.+)>:$)"), instruction(R"(^\s+[0-9a-f]+:\t(.*)$)"),
      relocation(R"(^\s+[0-9a-f]+: R_\S+\s+(.+)$)");
  std::vector<ObjectFunction> functions;
  std::istringstream in(objdump_output);
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_match(line, m, header)) {
      functions.push_back({m[1].str(), 0, {}, false});
    } else if (functions.empty()) {
      continue;
    } else if (std::regex_match(line, m, relocation)) {
      std::string target = m[1].str();
      // The addend: exit-0x4, .text+0x20, foo(int)+0x8 (the name itself may hold '-' or '+' only inside parentheses or brackets).
      const std::size_t cut = target.find_last_of("+-");
      if (cut != std::string::npos && cut > 0 && target.compare(cut + 1, 2, "0x") == 0) target.erase(cut);
      functions.back().references.insert(target);
    } else if (std::regex_match(line, m, instruction)) {
      ++functions.back().instructions;
      // The constant 1 on its way to exit: x86-64 "movl $0x1,0xc(%rsp)", AArch64 "mov w0, #0x1".
      const std::string& text = m[1].str();
      static const std::regex arm_one(R"(^mov\s+w\d+, #0x1\b.*)");
      if ((text.rfind("mov", 0) == 0 && text.find("$0x1,") != std::string::npos && text.find('(') != std::string::npos) || std::regex_match(text, arm_one)) {
        functions.back().stores_one = true;
      }
    }
  }
  return functions;
}

bool is_device_function_stub(const ObjectFunction& f) {
  // gcc -O0 spills the parameters first (one instruction each, up to a handful), -O2 and -O3 need
  // four or five instructions; 24 leaves room for either and for many parameters, not for code.
  return f.stores_one && f.instructions <= 24 && f.references.size() == 1 && f.references.count("exit") == 1;
}

bool declared_device_only(const std::string& source, const std::string& name) {
  if (name.empty()) return false;
  for (std::size_t at = source.find(name); at != std::string::npos; at = source.find(name, at + 1)) {
    const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    if (at > 0 && word(source[at - 1])) continue;
    std::size_t after = at + name.size();
    if (after < source.size() && word(source[after])) continue;
    while (after < source.size() && std::isspace(static_cast<unsigned char>(source[after]))) ++after;
    if (after >= source.size() || source[after] != '(') continue;
    // The declaration's head: from the end of the previous statement, block or brace to the name.
    const std::size_t start = source.find_last_of(";{}", at);
    const std::string head = source.substr(start == std::string::npos ? 0 : start + 1, at - (start == std::string::npos ? 0 : start + 1));
    if (head.find("__device__") != std::string::npos && head.find("__host__") == std::string::npos && head.find("__global__") == std::string::npos) return true;
  }
  return false;
}

std::set<std::string> data_references(const std::string& objdump_r_output) {
  // "RELOCATION RECORDS FOR [.data.rel.ro.local]:" then "OFFSET TYPE VALUE" rows.
  std::set<std::string> refs;
  std::istringstream in(objdump_r_output);
  bool code = true;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("RELOCATION RECORDS FOR [", 0) == 0) {
      const std::string section = line.substr(24, line.find(']') - 24);
      // Code, and what only describes code (unwind tables), may name exit; anything else is data.
      code = section.rfind(".text", 0) == 0 || section == ".eh_frame" || section.rfind(".debug", 0) == 0 || section == ".gcc_except_table";
      continue;
    }
    std::istringstream fields(line);
    std::string offset, type, value;
    if (code || !(fields >> offset >> type >> value) || type.rfind("R_", 0) != 0) continue;
    const std::size_t cut = value.find_last_of("+-");
    if (cut != std::string::npos && cut > 0 && value.compare(cut + 1, 2, "0x") == 0) value.erase(cut);
    refs.insert(value);
  }
  return refs;
}

bool only_device_stubs_reference(const std::vector<ObjectFunction>& functions, const std::set<std::string>& data_refs,
                                 const std::string& source, const std::string& symbol) {
  if (data_refs.count(symbol)) return false;
  bool any = false;
  for (const ObjectFunction& f : functions) {
    if (!f.references.count(symbol)) continue;
    // "lab04::(anonymous namespace)::mma_warp_step<4>(...)" → "mma_warp_step"
    std::string name = qualified_name(f.name);
    int depth = 0;
    std::size_t begin = 0, end = name.size();
    for (std::size_t i = 0; i < name.size(); ++i) {
      if (name[i] == '<' && depth++ == 0 && end == name.size()) end = i;
      if (name[i] == '>') --depth;
      if (depth == 0 && i + 1 < name.size() && name[i] == ':' && name[i + 1] == ':') {
        begin = i + 2;
        end = name.size();
      }
    }
    if (!is_device_function_stub(f) || !declared_device_only(source, name.substr(begin, end - begin))) return false;
    any = true;
  }
  return any;
}

}  // namespace gpulab::cli
