/// @file emu_transform.hpp
/// @brief CUDA source rewritten as C++ for the CPU block emulator (tools/emulator/emu.hpp).
///
/// Three rewrites, each found by scanning the code (comments and string literals are skipped),
/// not by a regular expression over the whole text:
///
///     kernel<<<grid, block, smem, stream>>>(args);
///         → emu::Launch(grid, block, smem, stream).of(kernel).run([&] { kernel(args); });
///       the kernel may be qualified (lab01::k), a template-id (k<float, 4>) or a function
///       pointer; arguments may hold parentheses, templates and lambdas.
///     extern __shared__ T name[];   → T* name = emu::dynamic_shared<T>();
///     the static __shared__ arrays of each non-template __global__ function are summed and
///       registered after it, so the emulated cudaFuncGetAttributes reports them.
/// Everything else (__device__ helpers, templates, __launch_bounds__) is left to emu.hpp's macros.
#pragma once

#include <stdexcept>
#include <string>

namespace gpulab::cli {

/// A construct the rewrite cannot handle (an unterminated launch): what and where (line).
struct TransformError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The emulator's C++ for the CUDA text @p source; @p where names the file in errors.
std::string emulator_source(const std::string& source, const std::string& where);

}  // namespace gpulab::cli
