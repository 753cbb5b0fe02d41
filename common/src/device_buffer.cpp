/// @file device_buffer.cpp
/// @brief Guard bands of DeviceBuffer: fill at allocation, check on request.
#include "gpulab/device_buffer.hpp"

#include <sstream>

namespace gpulab {
namespace detail {
namespace {
std::vector<unsigned char> pattern(std::size_t n) {
  std::vector<unsigned char> p(n);
  for (std::size_t k = 0; k < n; ++k) p[k] = guard_byte(k);
  return p;
}
}  // namespace

void* allocate_guarded(std::size_t data_bytes) {
  void* base = nullptr;
  CUDA_CHECK(cudaMalloc(&base, kFrontGuardBytes + data_bytes + kBackGuardBytes));
  // Byte k of each guard counts outward from the data, so "offset 0" is the adjacent byte.
  std::vector<unsigned char> front = pattern(kFrontGuardBytes);
  std::vector<unsigned char> front_reversed(front.rbegin(), front.rend());
  const std::vector<unsigned char> back = pattern(kBackGuardBytes);
  char* bytes = static_cast<char*>(base);
  try {
    CUDA_CHECK(cudaMemcpy(bytes, front_reversed.data(), kFrontGuardBytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(bytes + kFrontGuardBytes + data_bytes, back.data(), kBackGuardBytes,
                          cudaMemcpyHostToDevice));
  } catch (...) {
    cudaFree(base);
    throw;
  }
  return base;
}

GuardReport check_guarded(const void* base, std::size_t data_bytes) {
  GuardReport report;
  if (base == nullptr) return report;
  const char* bytes = static_cast<const char*>(base);
  std::vector<unsigned char> front(kFrontGuardBytes), back(kBackGuardBytes);
  CUDA_CHECK(cudaMemcpy(front.data(), bytes, kFrontGuardBytes, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(back.data(), bytes + kFrontGuardBytes + data_bytes, kBackGuardBytes,
                        cudaMemcpyDeviceToHost));
  for (std::size_t k = 0; k < kFrontGuardBytes; ++k) {
    if (front[kFrontGuardBytes - 1 - k] != guard_byte(k)) {
      report = {false, true, k};
      return report;
    }
  }
  for (std::size_t k = 0; k < kBackGuardBytes; ++k) {
    if (back[k] != guard_byte(k)) {
      report = {false, false, k};
      return report;
    }
  }
  return report;
}
}  // namespace detail

std::string GuardReport::describe(const std::string& buffer_name) const {
  if (intact) return buffer_name + ": guard bands intact";
  std::ostringstream msg;
  msg << buffer_name << ": out-of-bounds write " << (front ? "before the start" : "past the end")
      << " (byte " << byte_offset << (front ? " before element 0" : " after the last element")
      << " changed). Check the bounds test in your kernel (i < n, not i <= n).";
  return msg.str();
}

}  // namespace gpulab
