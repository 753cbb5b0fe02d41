/// @file diagnose.cpp
/// @brief Kernel resources from ptxas (see diagnose.hpp).
#include "grade/diagnose.hpp"

#include <unistd.h>

#include <cstdio>
#include <regex>
#include <sstream>

#include "base/process.hpp"
#include "grade/symbols.hpp"

namespace gpulab::cli {

std::vector<KernelResources> parse_ptxas(const std::string& log) {
  static const std::regex entry(R"(Compiling entry function '([^']+)' for '(sm_\w+)')");
  static const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used(R"(Used (\d+) registers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  std::vector<KernelResources> kernels;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, entry)) {
      kernels.push_back({m[1].str(), m[2].str()});
    } else if (!kernels.empty() && std::regex_search(line, m, frame)) {
      kernels.back().stack_bytes = std::stoi(m[1].str());
      kernels.back().spill_store_bytes = std::stoi(m[2].str());
      kernels.back().spill_load_bytes = std::stoi(m[3].str());
    } else if (!kernels.empty() && std::regex_search(line, m, used)) {
      kernels.back().registers = std::stoi(m[1].str());
      if (std::regex_search(line, m, smem)) kernels.back().shared_bytes = std::stoi(m[1].str());
    }
  }
  return kernels;
}

std::vector<KernelResources> kernel_resources(const fs::path& build, const fs::path& source, std::string& error) {
  const fs::path db = build / "compile_commands.json";
  if (!fs::exists(db)) {
    error = "no compile_commands.json in the build tree";
    return {};
  }
  const nlohmann::json commands = nlohmann::json::parse(read_text(db));
  const std::string wanted = fs::weakly_canonical(source).string();
  for (const auto& entry : commands) {
    if (fs::weakly_canonical(entry.value("file", "")).string() != wanted) continue;
    std::string command = entry.value("command", "");
    // Cached by the source's content and the command: a grade recompiles only what changed.
    const fs::path cache_file = build / "grade" / "diagnosis-cache.json";
    nlohmann::json cache = fs::exists(cache_file) ? nlohmann::json::parse(read_text(cache_file), nullptr, false)
                                                  : nlohmann::json::object();
    if (!cache.is_object()) cache = nlohmann::json::object();
    // "names 2": kernels' names kept whole in anonymous namespaces (earlier caches cut them at the '(').
    const std::string key = content_hash("names 2\n" + read_text(source) + "\n" + command);
    if (cache.contains(key)) {
      std::vector<KernelResources> kernels;
      for (const auto& k : cache[key]) {
        kernels.push_back({k["name"], k["arch"], k["registers"], k["shared"], k["stack"], k["spill_store"], k["spill_load"]});
      }
      return kernels;
    }
    // The object file follows " -o " (CMake 3.25 records no separate "output" field). The device
    // side alone (--fatbin for -c: every code instance, no host compile) gives ptxas's report at
    // less than half the cost of the whole compile.
    const fs::path scratch = build / "grade" / ("ptxas-scratch-" + std::to_string(getpid()) + ".fatbin");  // selftest grades two labs at once
    const std::size_t at = command.rfind(" -o "), compile = command.find(" -c ");
    if (command.empty() || at == std::string::npos || compile == std::string::npos) {
      error = "unexpected compile command for " + source.string();
      return {};
    }
    const std::size_t end = command.find(' ', at + 4);
    command.replace(at, (end == std::string::npos ? command.size() : end) - at, " -o " + scratch.string());
    command.replace(compile, 4, " --fatbin ");
    command += " -Xptxas=-v";
    ProcessOptions o;
    o.timeout_s = 300;
    o.cwd = entry.value("directory", build.string());
    const ProcessResult r = run_process({"sh", "-c", command}, o);
    fs::remove(scratch);
    if (!r.exited(0)) {
      error = "the diagnostic compile failed: " + r.describe();
      return {};
    }
    std::vector<KernelResources> kernels = parse_ptxas(r.output);
    // Demangle all names at once, and keep them short: the parameters add nothing here.
    std::vector<std::string> argv = {"c++filt"};
    for (const auto& k : kernels) argv.push_back(k.name);
    const ProcessResult names = run_process(argv, {});
    std::istringstream lines(names.output);
    for (auto& k : kernels) {
      std::string demangled;
      if (names.exited(0) && std::getline(lines, demangled) && !demangled.empty()) k.name = demangled;
      k.name = qualified_name(k.name);  // no return type, no parameters; "(anonymous namespace)" kept
    }
    nlohmann::json stored = nlohmann::json::array();
    for (const auto& k : kernels) {
      stored.push_back({{"name", k.name}, {"arch", k.arch}, {"registers", k.registers}, {"shared", k.shared_bytes},
                        {"stack", k.stack_bytes}, {"spill_store", k.spill_store_bytes}, {"spill_load", k.spill_load_bytes}});
    }
    cache[key] = stored;
    write_text(cache_file, cache.dump() + "\n");
    return kernels;
  }
  error = source.string() + " is not in compile_commands.json";
  return {};
}

namespace {

/// "lab06::(anonymous namespace)::scale<lab06::Half>" → "scale<lab06::Half>": the last name at
/// template depth 0.
std::string unqualified(const std::string& name) {
  int depth = 0;
  std::size_t begin = 0;
  for (std::size_t i = 0; i + 1 < name.size(); ++i) {
    if (name[i] == '<') ++depth;
    if (name[i] == '>') --depth;
    if (depth == 0 && name[i] == ':' && name[i + 1] == ':') begin = i + 2;
  }
  return name.substr(begin);
}

}  // namespace

void describe_resources(const std::vector<KernelResources>& mine, const std::vector<KernelResources>& reference,
                        std::vector<std::string>& lines, std::vector<std::string>& hints) {
  auto summary = [](const KernelResources& k) {
    std::string s = std::to_string(k.registers) + " registers";
    if (k.shared_bytes > 0) s += ", " + std::to_string(k.shared_bytes) + " B shared";
    const int spill = std::max(k.spill_store_bytes, k.stack_bytes);
    s += spill > 0 ? ", " + std::to_string(spill) + " B local memory (spills or stack)" : ", no spills";
    return s;
  };
  for (const KernelResources& k : mine) {
    const KernelResources* ref = nullptr;
    for (const auto& r : reference) {
      if (r.name == k.name && r.arch == k.arch) ref = &r;
    }
    const std::string short_name = unqualified(k.name);
    lines.push_back(short_name + " (" + k.arch + "): " + summary(k) + (ref ? "   [reference: " + summary(*ref) + "]" : ""));
    const int local = std::max(k.spill_store_bytes, k.stack_bytes);
    const int ref_local = ref ? std::max(ref->spill_store_bytes, ref->stack_bytes) : 0;
    if (local > ref_local) {
      hints.push_back(short_name + " uses " + std::to_string(local) +
                      " bytes of local memory per thread: an array indexed at run time, or too many live values. "
                      "Local memory is global memory: every access is a trip to L1/L2/DRAM.");
    }
    if (k.registers >= 128 && (!ref || k.registers > ref->registers + 16)) {
      hints.push_back(short_name + " uses " + std::to_string(k.registers) + " registers per thread: at most " +
                      std::to_string(65536 / k.registers) +
                      " threads per SM can be resident (of 2048 on recent GPUs), fewer warps to hide memory latency.");
    }
    if (ref && ref->shared_bytes > 0 && k.shared_bytes == 0) {
      hints.push_back(short_name + " uses no shared memory where the reference uses " + std::to_string(ref->shared_bytes) +
                      " bytes: this rung is about staging data in shared memory.");
    }
  }
}

namespace {
std::string kernel_summary(const nlohmann::json& k) {
  const long long smem = k.value("static_smem_bytes", 0LL) + k.value("dynamic_smem_bytes", 0LL);
  char b[200];
  std::snprintf(b, sizeof b, "%d registers, %.1f KB shared, %lld B local; %d blocks of %d threads per SM = %.0f %% occupancy",
                k.value("registers", 0), smem / 1024.0, k.value("local_bytes", 0LL), k.value("blocks_per_sm", 0),
                k.value("threads_per_block", 0), 100.0 * k.value("occupancy", 0.0));
  return b;
}
}  // namespace

void describe_kernel_fields(const nlohmann::json& mine, const nlohmann::json& reference, const std::string& who,
                            std::vector<std::string>& lines, std::vector<std::string>& hints) {
  if (!mine.is_object()) return;
  const std::string name = mine.value("name", std::string());
  std::string line = "kernel " + (name.empty() ? std::string() : name + " ") + "(" + who + "): " + kernel_summary(mine);
  if (reference.is_object()) line += "; reference: " + kernel_summary(reference);
  lines.push_back(line);
  const long long local = mine.value("local_bytes", 0LL);
  if (local > 0) {
    hints.push_back(std::to_string(local) +
                    " bytes of local memory per thread: an array indexed at run time (unroll the loops that index it) "
                    "or registers spilled");
  }
  if (reference.is_object()) {
    const double occ = mine.value("occupancy", 0.0), ref_occ = reference.value("occupancy", 0.0);
    const int regs = mine.value("registers", 0), ref_regs = reference.value("registers", 0);
    if (occ > 0 && occ <= 0.5 * ref_occ) {  // half the reference's or less
      char b[200];
      std::snprintf(b, sizeof b, "occupancy %.0f %% against the reference's %.0f %%: %s", 100 * occ, 100 * ref_occ,
                    regs > ref_regs ? (std::to_string(regs) + " registers per thread leave room for fewer blocks").c_str()
                                    : "look at the block size and the shared memory per block");
      hints.push_back(b);
    }
  }
}

void describe_launched_kernels(const nlohmann::json& mine, const nlohmann::json& reference, const std::string& who,
                               std::vector<std::string>& lines, std::vector<std::string>& hints) {
  if (mine.is_object() && mine.contains("error")) {
    lines.push_back("kernels (" + who + "): not available: " + mine.value("error", std::string("?")));
    return;
  }
  if (!mine.is_array()) return;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    nlohmann::json match;  // null: no reference kernel to compare with
    if (reference.is_array()) {
      for (const auto& r : reference) {
        if (r.value("name", std::string("-")) == mine[i].value("name", std::string("+"))) match = r;
      }
      if (match.is_null() && reference.size() == mine.size()) match = reference[i];
    }
    describe_kernel_fields(mine[i], match, who, lines, hints);
  }
}

}  // namespace gpulab::cli
