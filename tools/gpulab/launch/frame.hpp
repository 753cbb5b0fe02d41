/// @file frame.hpp
/// @brief The one line gpulab-launch writes about a process under test, as both sides spell it:
/// `@@gpulab-frame <length> <checksum> <json>` (README.md). Header-only: the launcher links
/// nothing of the CLI.
#pragma once

#include <cstdint>
#include <string>

#include "gpulab/hash.hpp"

namespace gpulab::launch {

/// What starts a frame (after a newline).
inline constexpr char kFrameMarker[] = "@@gpulab-frame ";

/// The project's FNV-1a of the frame's JSON: a damaged or spliced frame is caught; not a secret
/// (the grader counts frames, one per process, rather than trusting one).
inline std::uint64_t frame_checksum(const std::string& body) { return fnv1a64(body); }

}  // namespace gpulab::launch
