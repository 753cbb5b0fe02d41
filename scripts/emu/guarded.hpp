/// @file guarded.hpp
/// @brief What the emulator's drivers share: host buffers that stand in for device buffers
/// (16-byte aligned plus an optional offset in elements, with guard bands on both sides filled
/// with a byte pattern that nothing may overwrite: the emulated kernels write host memory
/// directly), and a tally of checks that prints one line per failure and a summary.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace emu {

template <class T>
class Guarded {
 public:
  /// @p values at @p offset elements past a 16-byte boundary, @p guard_bytes of guard each side.
  explicit Guarded(const std::vector<T>& values, std::size_t offset = 0, std::size_t guard_bytes = 4096)
      : count_(values.size()), front_(round_up(guard_bytes) + offset * sizeof(T)) {
    memory_.assign((front_ + count_ * sizeof(T) + guard_bytes) / 16 + 2, Block{});
    std::memset(bytes(), kPattern, memory_.size() * sizeof(Block));
    if (count_ > 0) std::memcpy(data(), values.data(), count_ * sizeof(T));
  }
  T* data() { return reinterpret_cast<T*>(bytes() + front_); }
  std::vector<T> values() const {
    std::vector<T> v(count_);
    if (count_ > 0) std::memcpy(v.data(), reinterpret_cast<const unsigned char*>(memory_.data()) + front_, count_ * sizeof(T));
    return v;
  }
  /// Bytes outside [data, data + count) that no longer hold the pattern.
  std::size_t stray_writes() const {
    const auto* b = reinterpret_cast<const unsigned char*>(memory_.data());
    std::size_t stray = 0;
    for (std::size_t i = 0; i < memory_.size() * sizeof(Block); ++i) {
      if ((i < front_ || i >= front_ + count_ * sizeof(T)) && b[i] != kPattern) ++stray;
    }
    return stray;
  }

 private:
  struct alignas(16) Block {
    unsigned char b[16];
  };
  static constexpr unsigned char kPattern = 0xA5;
  static std::size_t round_up(std::size_t n) { return (n + 15) / 16 * 16; }
  unsigned char* bytes() { return reinterpret_cast<unsigned char*>(memory_.data()); }

  std::size_t count_, front_;
  std::vector<Block> memory_;
};

/// Counts checks; prints each failure, and a last line "emulate NN: F of N checks failed".
class Tally {
 public:
  explicit Tally(std::string lab) : lab_(std::move(lab)) {}
  void check(bool ok, const std::string& what, const std::string& detail = "") {
    ++count_;
    if (ok) return;
    ++failed_;
    std::printf("WRONG  %s%s%s\n", what.c_str(), detail.empty() ? "" : ": ", detail.c_str());
  }
  /// Prints the summary; the process's exit status.
  int finish() const {
    std::printf("emulate %s: %d of %d checks failed\n", lab_.c_str(), failed_, count_);
    return failed_ == 0 ? 0 : 1;
  }

 private:
  std::string lab_;
  int count_ = 0, failed_ = 0;
};

/// Runs a driver's checks; an exception (a launch a GPU would refuse, a std::invalid_argument from
/// the lab) is reported as a failure rather than a crash.
inline int run_driver(const char* lab, void (*checks)(Tally&)) {
  Tally tally(lab);
  try {
    checks(tally);
  } catch (const std::exception& e) {
    tally.check(false, "stopped by an exception", e.what());
  }
  return tally.finish();
}

}  // namespace emu
