/// @file diagnose.hpp
/// @brief What each kernel costs in registers, shared memory and spills, from the compiler
/// itself (`nvcc -Xptxas -v`), for the learner's code beside the reference's.
///
/// The grader re-runs the exact compile command CMake used for a source file (from
/// compile_commands.json), device side only (--fatbin for -c), with -Xptxas=-v and its output
/// sent to a scratch file, so the figures are the ones of the build being graded, for the
/// architecture it targets. Theoretical occupancy also depends on the block size and the GPU's
/// limits: it is reported where a GPU runs the tests, not here.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/lab_config.hpp"

namespace gpulab::cli {

struct KernelResources {
  std::string name;  ///< demangled, without parameters: "lab02::transpose_tiled_kernel"
  std::string arch;  ///< "sm_75"
  int registers = 0;
  int shared_bytes = 0;  ///< static shared memory (dynamic shared memory is set at launch)
  int stack_bytes = 0;
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
};

/// Parses ptxas's verbose output (mangled names as they appear).
std::vector<KernelResources> parse_ptxas(const std::string& log);

/// Compiles @p source again with -Xptxas=-v, using its entry in @p build's compile_commands.json,
/// and returns its kernels (demangled); empty with @p error set when it cannot.
std::vector<KernelResources> kernel_resources(const fs::path& build, const fs::path& source, std::string& error);

/// One line per kernel of @p mine, with the reference's figures beside them where a kernel of
/// the same name exists, and plain-language hints for what stands out.
void describe_resources(const std::vector<KernelResources>& mine, const std::vector<KernelResources>& reference,
                        std::vector<std::string>& lines, std::vector<std::string>& hints);

/// One line for a kernel's figures as a test recorded them on the GPU (gpulab::testing::
/// kernel_fields: registers, shared and local bytes, blocks per SM, theoretical occupancy from
/// the CUDA occupancy API), with the reference's beside them when given (non-null), and a hint
/// when local memory or a low occupancy stands out. @p who names the first ("yours", "reference").
void describe_kernel_fields(const nlohmann::json& mine, const nlohmann::json& reference, const std::string& who,
                            std::vector<std::string>& lines, std::vector<std::string>& hints);

/// describe_kernel_fields for each kernel a test captured (gpulab::testing::launched_kernels: an
/// array, or {"error": ...} when the launches could not be captured), each beside the reference's
/// kernel of the same name (or at the same position when the names differ and the counts agree).
void describe_launched_kernels(const nlohmann::json& mine, const nlohmann::json& reference, const std::string& who,
                               std::vector<std::string>& lines, std::vector<std::string>& hints);

}  // namespace gpulab::cli
