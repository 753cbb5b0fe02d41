/// @file check.cpp
/// @brief Error messages for CUDA_CHECK.
#include "gpulab/check.hpp"

#include <sstream>

namespace gpulab {

bool is_sticky(cudaError_t code) noexcept {
  switch (code) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchTimeout:
      return true;
    default:
      return false;
  }
}

void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line) {
  std::ostringstream msg;
  msg << "CUDA error " << cudaGetErrorName(code) << " (" << static_cast<int>(code)
      << "): " << cudaGetErrorString(code) << "\n  in " << call << "\n  at " << file << ':'
      << line;
  if (is_sticky(code)) {
    msg << "\n  This error is sticky: the CUDA context is now unusable and every later call in "
           "this process fails the same way. Look for an out-of-bounds access or a failed "
           "assert in the last kernel launched.";
  }
  throw CudaError(code, msg.str());
}

}  // namespace gpulab
