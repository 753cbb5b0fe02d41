/// @file hash.hpp
/// @brief The project's one content hash: 64-bit FNV-1a. Stable across runs and machines; not
/// for security (the grader's tamper checks compare a tree with itself, they do not resist an
/// attacker who can choose collisions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gpulab {

/// FNV-1a's offset basis: the hash of nothing.
inline constexpr std::uint64_t kFnvOffsetBasis = 1469598103934665603ull;

/// 64-bit FNV-1a of @p bytes, continuing from @p h (chain calls to hash several pieces as one).
inline std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t h = kFnvOffsetBasis) {
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace gpulab
