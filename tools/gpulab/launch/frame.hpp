/// @file frame.hpp
/// @brief The one line gpulab-launch writes about a process under test, as both sides spell it:
/// `@@gpulab-frame <length> <checksum> <json>` (README.md). Header-only: the launcher links
/// nothing of the CLI.
#pragma once

#include <cstdint>
#include <string>

namespace gpulab::launch {

/// What starts a frame (after a newline).
inline constexpr char kFrameMarker[] = "@@gpulab-frame ";

/// FNV-1a, 64 bits, of the frame's JSON: a damaged or spliced frame is caught; not a secret (the
/// grader counts frames, one per process, rather than trusting one).
inline std::uint64_t frame_checksum(const std::string& body) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : body) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace gpulab::launch
