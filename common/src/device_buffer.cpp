/// @file device_buffer.cpp
/// @brief DeviceBuffer's guard bands: gpulab/guard.hpp's patterns, written and read back over
/// cudaMemcpy.
#include "gpulab/device_buffer.hpp"

namespace gpulab::detail {

void* allocate_guarded(std::size_t data_bytes, std::uint32_t seed) {
  void* base = nullptr;
  CUDA_CHECK(cudaMalloc(&base, guard::kFrontBytes + data_bytes + guard::kBackBytes));
  std::vector<unsigned char> front(guard::kFrontBytes), back(guard::kBackBytes);
  guard::fill(front.data(), back.data(), seed);
  char* bytes = static_cast<char*>(base);
  try {
    CUDA_CHECK(cudaMemcpy(bytes, front.data(), guard::kFrontBytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(bytes + guard::kFrontBytes + data_bytes, back.data(), guard::kBackBytes, cudaMemcpyHostToDevice));
  } catch (...) {
    cudaFree(base);
    throw;
  }
  return base;
}

GuardReport check_guarded(const void* base, std::size_t data_bytes, std::uint32_t seed) {
  if (base == nullptr) return {};
  const char* bytes = static_cast<const char*>(base);
  std::vector<unsigned char> front(guard::kFrontBytes), back(guard::kBackBytes);
  CUDA_CHECK(cudaMemcpy(front.data(), bytes, guard::kFrontBytes, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(back.data(), bytes + guard::kFrontBytes + data_bytes, guard::kBackBytes, cudaMemcpyDeviceToHost));
  return guard::check(front.data(), back.data(), seed);
}

}  // namespace gpulab::detail
