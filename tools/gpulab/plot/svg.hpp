/// @file svg.hpp
/// @brief The two helpers every SVG chart of the CLI needs (plot.cpp, plot_timeline.cpp).
#pragma once

#include <cstdio>
#include <string>

namespace gpulab::cli {

/// @p text with &, <, > and " escaped for SVG text and attributes.
inline std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

/// @p v with @p digits decimals.
inline std::string num(double v, int digits = 1) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

}  // namespace gpulab::cli
