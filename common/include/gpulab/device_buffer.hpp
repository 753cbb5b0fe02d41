/// @file device_buffer.hpp
/// @brief DeviceBuffer<T>: move-only owner of device memory, between guard bands (gpulab/guard.hpp:
/// the layout, the per-buffer patterns and the check are the same as HostBuffer's).
///
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
#include "gpulab/guard.hpp"

namespace gpulab {

namespace detail {
/// Allocates the bands and @p data_bytes between them, fills the bands with pattern @p seed.
void* allocate_guarded(std::size_t data_bytes, std::uint32_t seed);
/// Reads both bands back (synchronises the device) and checks them against pattern @p seed.
GuardReport check_guarded(const void* base, std::size_t data_bytes, std::uint32_t seed);
}  // namespace detail

/// Owns `count` elements of T on the current device (see the file comment for the layout).
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// Allocates @p count elements (uninitialised) between two guard bands.
  explicit DeviceBuffer(std::size_t count)
      : seed_(guard::next_seed()), base_(detail::allocate_guarded(count * sizeof(T), seed_)), count_(count) {}
  /// Allocates and uploads @p host.
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { release(); }

  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  /// Takes over @p other's memory; @p other is left empty.
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : seed_(other.seed_), base_(std::exchange(other.base_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  /// Frees this buffer's memory, then takes over @p other's.
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      seed_ = other.seed_;
      base_ = std::exchange(other.base_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }

  /// The first element (device memory).
  T* data() { return reinterpret_cast<T*>(static_cast<char*>(base_) + guard::kFrontBytes); }
  /// The first element (device memory).
  const T* data() const {
    return reinterpret_cast<const T*>(static_cast<const char*>(base_) + guard::kFrontBytes);
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
  GuardReport check_guards() const { return detail::check_guarded(base_, bytes(), seed_); }

 private:
  void release() noexcept {
    if (base_ != nullptr) cudaFree(base_);  // errors here cannot be reported from a destructor
    base_ = nullptr;
    count_ = 0;
  }
  std::uint32_t seed_ = 0;
  void* base_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace gpulab
