/// @file launch_frame.hpp
/// @brief The tests' reading of gpulab-launch's frame line from a run's output.
#pragma once

#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "launch/frame.hpp"

/// The JSON of the one frame in @p output (a failed REQUIRE when there is none or it is damaged).
inline nlohmann::json launch_frame(const std::string& output) {
  const std::size_t at = output.find(gpulab::launch::kFrameMarker);
  REQUIRE(at != std::string::npos);
  std::size_t length = 0;
  unsigned long long sum = 0;
  int used = 0;
  REQUIRE(std::sscanf(output.c_str() + at + sizeof gpulab::launch::kFrameMarker - 1, "%zu %16llx %n", &length, &sum, &used) == 2);
  const std::string body = output.substr(at + sizeof gpulab::launch::kFrameMarker - 1 + static_cast<std::size_t>(used), length);
  REQUIRE(gpulab::launch::frame_checksum(body) == sum);
  return nlohmann::json::parse(body);
}
