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

const char* cublas_status_name(int status) noexcept {
  switch (status) {
    case 0: return "CUBLAS_STATUS_SUCCESS";
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case 16: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "an unknown cuBLAS status";
  }
}

}  // namespace gpulab
