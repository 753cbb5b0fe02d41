/// @file check.hpp
/// @brief CUDA_CHECK and CUDA_CHECK_LAUNCH: every runtime call checked, failures thrown with the
/// call's text, file:line and the error's name, so a test records a failure instead of dying.
///
/// Some errors are *sticky*: after an illegal address, a failed assert or a kernel that the
/// watchdog killed, the CUDA context is broken and every later call in this process returns the
/// same error. The message says so; the grader runs each test case in its own process for this
/// reason.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace gpulab {

/// A failed CUDA runtime call.
class CudaError : public std::runtime_error {
 public:
  /// An error @p code with its full @p message (see throw_cuda_error).
  CudaError(cudaError_t code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  /// The runtime's error code.
  cudaError_t code() const noexcept { return code_; }

 private:
  cudaError_t code_;
};

/// True for the errors that leave the context unusable (see the file comment).
bool is_sticky(cudaError_t code) noexcept;

/// Builds the message and throws CudaError. Used by the macros below.
[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line);

/// cuBLAS's status names (cublas_api.h), for CUBLAS_CHECK without including cuBLAS here.
const char* cublas_status_name(int status) noexcept;

/// Throws std::runtime_error with the call's text, file:line and the status's name unless
/// @p status is CUBLAS_STATUS_SUCCESS (0). Used by CUBLAS_CHECK.
template <class Status>
void check_cublas(Status status, const char* call, const char* file, int line) {
  const int code = static_cast<int>(status);
  if (code == 0) return;
  throw std::runtime_error(std::string("cuBLAS error ") + cublas_status_name(code) + " (" + std::to_string(code) + ")\n  in " + call +
                           "\n  at " + file + ":" + std::to_string(line));
}

}  // namespace gpulab

/// Checks a CUDA runtime call; throws gpulab::CudaError on failure.
#define CUDA_CHECK(call)                                                 \
  do {                                                                   \
    const cudaError_t gpulab_status_ = (call);                           \
    if (gpulab_status_ != cudaSuccess)                                   \
      ::gpulab::throw_cuda_error(gpulab_status_, #call, __FILE__, __LINE__); \
  } while (0)

/// Checks a cuBLAS call; throws std::runtime_error on any status but success.
#define CUBLAS_CHECK(call) ::gpulab::check_cublas((call), #call, __FILE__, __LINE__)

/// After a kernel launch: a bad configuration (too many threads, too much shared memory) is
/// reported by cudaGetLastError, not by the launch statement itself.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
