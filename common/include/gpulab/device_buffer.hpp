/// @file device_buffer.hpp
/// @brief DeviceBuffer<T>: move-only owner of device memory, with guard bands.
///
/// Every buffer is allocated with a guard band before and after the elements, filled with a
/// known byte pattern:
///
///     | front guard 256 B | count × sizeof(T) | back guard 4 KiB |
///                         ^ data()
///
/// A kernel that writes one element past the end (the classic `i <= n`) leaves the output values
/// right and the back guard changed; `check_guards()` finds it. 256 B keeps data() aligned for
/// 128-bit (and wider) vector loads, like cudaMalloc itself. A zero-element buffer still has
/// guards and a valid data() pointer, so "n = 0 writes nothing" is testable.
/// Reads out of bounds and writes beyond the guards need compute-sanitizer (gpulab grade
/// --sanitize).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gpulab/check.hpp"

namespace gpulab {

/// Where a guard band was found overwritten.
struct GuardReport {
  bool intact = true;            ///< no guard byte changed
  bool front = false;            ///< true: before the data, false: after it
  std::size_t byte_offset = 0;   ///< first changed byte, counted from the data edge outward
  /// "c: out-of-bounds write past the end (byte 0 after the last element changed) ..."
  std::string describe(const std::string& buffer_name) const;
};

namespace detail {
inline constexpr std::size_t kFrontGuardBytes = 256;
inline constexpr std::size_t kBackGuardBytes = 4096;
/// Byte k of a guard band: alternating 0xA5 / 0x5A with a slow ramp, so that neither zeros nor a
/// repeated float can match it by accident.
inline unsigned char guard_byte(std::size_t k) {
  return static_cast<unsigned char>(((k & 1) ? 0x5A : 0xA5) ^ ((k >> 1) & 0x0F));
}
void* allocate_guarded(std::size_t data_bytes);            // fills both guards
GuardReport check_guarded(const void* base, std::size_t data_bytes);
}  // namespace detail

/// Owns `count` elements of T on the current device (see the file comment for the layout).
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// Allocates @p count elements (uninitialised) between two guard bands.
  explicit DeviceBuffer(std::size_t count)
      : base_(detail::allocate_guarded(count * sizeof(T))), count_(count) {}
  /// Allocates and uploads @p host.
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { release(); }

  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  /// Takes over @p other's memory; @p other is left empty.
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : base_(std::exchange(other.base_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  /// Frees this buffer's memory, then takes over @p other's.
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      base_ = std::exchange(other.base_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }

  /// The first element (device memory).
  T* data() { return reinterpret_cast<T*>(static_cast<char*>(base_) + detail::kFrontGuardBytes); }
  /// The first element (device memory).
  const T* data() const {
    return reinterpret_cast<const T*>(static_cast<const char*>(base_) + detail::kFrontGuardBytes);
  }
  /// Number of elements.
  std::size_t size() const { return count_; }
  /// size() × sizeof(T).
  std::size_t bytes() const { return count_ * sizeof(T); }

  /// Copies host → device; @p host must hold size() elements.
  void upload(const std::vector<T>& host) {
    if (host.size() != count_) throw std::invalid_argument("DeviceBuffer::upload: size mismatch");
    if (count_ > 0) CUDA_CHECK(cudaMemcpy(data(), host.data(), bytes(), cudaMemcpyHostToDevice));
  }
  /// Copies device → host (synchronous).
  std::vector<T> download() const {
    std::vector<T> host(count_);
    if (count_ > 0) CUDA_CHECK(cudaMemcpy(host.data(), data(), bytes(), cudaMemcpyDeviceToHost));
    return host;
  }
  /// Sets every byte of the elements (not the guards) to @p byte.
  void fill_bytes(unsigned char byte) {
    if (count_ > 0) CUDA_CHECK(cudaMemset(data(), byte, bytes()));
  }
  /// Fills the elements with @p value (e.g. a NaN, to poison an output before a kernel runs).
  void fill(const T& value) { upload(std::vector<T>(count_, value)); }

  /// Reads both guard bands back and reports the first changed byte. Synchronises the device.
  GuardReport check_guards() const { return detail::check_guarded(base_, bytes()); }

 private:
  void release() noexcept {
    if (base_ != nullptr) cudaFree(base_);  // errors here cannot be reported from a destructor
    base_ = nullptr;
    count_ = 0;
  }
  void* base_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace gpulab
