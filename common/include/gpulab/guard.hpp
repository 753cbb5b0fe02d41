/// @file guard.hpp
/// @brief Guard bands: the one implementation behind DeviceBuffer (device memory) and
/// HostBuffer (host memory). Every buffer sits between two bands of known bytes:
///
///     | front guard 256 B | count × sizeof(T) | back guard 4 KiB |
///                         ^ data()
///
/// A write one element past the end (the classic `i <= n`) leaves the values right and the back
/// band changed; check_guards() finds it and says which byte. Each buffer's bands carry a pattern
/// of their own (seeded per buffer), so copying one buffer's band over another's is noticed too.
/// 256 B keeps data() aligned for 128-bit (and wider) accesses, like cudaMalloc itself; a
/// zero-element buffer still has bands and a valid data() pointer, so "n = 0 writes nothing" is
/// testable. Host-only: no CUDA here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gpulab {

/// Where a guard band was found overwritten.
struct GuardReport {
  bool intact = true;            ///< no guard byte changed
  bool front = false;            ///< true: before the data, false: after it
  std::size_t byte_offset = 0;   ///< first changed byte, counted from the data edge outward
  /// "c: out-of-bounds write past the end (byte 0 after the last element changed) ..."
  std::string describe(const std::string& buffer_name) const;
};

namespace guard {

inline constexpr std::size_t kFrontBytes = 256;   ///< the band before the data (keeps data() 256-byte aligned)
inline constexpr std::size_t kBackBytes = 4096;   ///< the band after the data

/// The back band of device buffers: kBackBytes, or 0 when GPULAB_GUARD_TIGHT is set (the CPU
/// emulator's second run, where each allocation ends against an inaccessible page so that a
/// read one past the end faults instead of reading the band).
std::size_t device_back_bytes();
/// A fresh pattern seed: every buffer gets its own.
std::uint32_t next_seed();
/// Byte @p k of a band, counted outward from the data, for pattern @p seed: never zero, never a
/// repeated float, different from buffer to buffer.
unsigned char byte(std::size_t k, std::uint32_t seed);
/// Fills the front band (the kFrontBytes before the data) and the back band (@p back_bytes after it).
void fill(unsigned char* front, unsigned char* back, std::uint32_t seed, std::size_t back_bytes = kBackBytes);
/// The first changed byte of either band (the front band first, nearest the data first).
GuardReport check(const unsigned char* front, const unsigned char* back, std::uint32_t seed, std::size_t back_bytes = kBackBytes);

}  // namespace guard

/// Owns @p count elements of T in host memory between two guard bands (see the file comment):
/// what a learner's host function is handed in the tests, so that a stray write is seen.
template <class T>
class HostBuffer {
 public:
  HostBuffer() = default;
  /// @p count elements, uninitialised (zeroed bytes), between fresh guard bands.
  explicit HostBuffer(std::size_t count) : count_(count), seed_(guard::next_seed()) {
    const std::size_t total = guard::kFrontBytes + count * sizeof(T) + guard::kBackBytes;
    base_ = static_cast<unsigned char*>(std::aligned_alloc(guard::kFrontBytes, (total + 255) / 256 * 256));
    if (base_ == nullptr) throw std::bad_alloc();
    std::memset(base_ + guard::kFrontBytes, 0, count * sizeof(T));
    guard::fill(base_, back(), seed_);
  }
  /// A copy of @p values between fresh guard bands.
  explicit HostBuffer(const std::vector<T>& values) : HostBuffer(values.size()) { assign(values); }
  ~HostBuffer() { std::free(base_); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  /// Takes over @p other's memory; @p other is left empty.
  HostBuffer(HostBuffer&& other) noexcept
      : base_(std::exchange(other.base_, nullptr)), count_(std::exchange(other.count_, 0)), seed_(other.seed_) {}
  /// Frees this buffer, then takes over @p other's memory.
  HostBuffer& operator=(HostBuffer&& other) noexcept {
    if (this != &other) {
      std::free(base_);
      base_ = std::exchange(other.base_, nullptr);
      count_ = std::exchange(other.count_, 0);
      seed_ = other.seed_;
    }
    return *this;
  }

  /// The first element.
  T* data() { return reinterpret_cast<T*>(base_ + guard::kFrontBytes); }
  /// The first element.
  const T* data() const { return reinterpret_cast<const T*>(base_ + guard::kFrontBytes); }
  /// Number of elements.
  std::size_t size() const { return count_; }
  /// The elements, copied out.
  std::vector<T> values() const { return std::vector<T>(data(), data() + count_); }
  /// Copies @p values in; they must number size().
  void assign(const std::vector<T>& values) {
    if (values.size() != count_) throw std::invalid_argument("HostBuffer::assign: size mismatch");
    if (count_ > 0) std::memcpy(data(), values.data(), count_ * sizeof(T));
  }
  /// The first changed guard byte, if any.
  GuardReport check_guards() const { return guard::check(base_, back(), seed_); }

 private:
  unsigned char* back() const { return base_ + guard::kFrontBytes + count_ * sizeof(T); }
  unsigned char* base_ = nullptr;
  std::size_t count_ = 0;
  std::uint32_t seed_ = 0;
};

}  // namespace gpulab
