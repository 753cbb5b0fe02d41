/// @file device_buffer.cpp
/// @brief DeviceBuffer's guard bands: gpulab/guard.hpp's patterns, written and read back over
/// cudaMemcpy.
#include "gpulab/device_buffer.hpp"

namespace gpulab::detail {

void* allocate_guarded(std::size_t data_bytes, std::uint32_t seed) {
  void* base = nullptr;
  const std::size_t back_bytes = guard::device_back_bytes();
  CUDA_CHECK(cudaMalloc(&base, guard::kFrontBytes + data_bytes + back_bytes));
  std::vector<unsigned char> front(guard::kFrontBytes), back(back_bytes);
  guard::fill(front.data(), back.data(), seed, back_bytes);
  char* bytes = static_cast<char*>(base);
  try {
    CUDA_CHECK(cudaMemcpy(bytes, front.data(), guard::kFrontBytes, cudaMemcpyHostToDevice));
    if (back_bytes > 0) CUDA_CHECK(cudaMemcpy(bytes + guard::kFrontBytes + data_bytes, back.data(), back_bytes, cudaMemcpyHostToDevice));
  } catch (...) {
    cudaFree(base);
    throw;
  }
  return base;
}

GuardReport check_guarded(const void* base, std::size_t data_bytes, std::uint32_t seed) {
  if (base == nullptr) return {};
  const char* bytes = static_cast<const char*>(base);
  const std::size_t back_bytes = guard::device_back_bytes();
  std::vector<unsigned char> front(guard::kFrontBytes), back(back_bytes);
  CUDA_CHECK(cudaMemcpy(front.data(), bytes, guard::kFrontBytes, cudaMemcpyDeviceToHost));
  if (back_bytes > 0) CUDA_CHECK(cudaMemcpy(back.data(), bytes + guard::kFrontBytes + data_bytes, back_bytes, cudaMemcpyDeviceToHost));
  return guard::check(front.data(), back.data(), seed, back_bytes);
}

}  // namespace gpulab::detail
