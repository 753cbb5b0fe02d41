/// @file hints.hpp
/// @brief `gpulab hint NN [k]`: a ladder of hints per TODO, one more each time.
#pragma once

#include <string>

#include "base/paths.hpp"

namespace gpulab::cli {

/// Without @p todo, the lab's TODOs and how many hints each has; with it (the number after the
/// dot, or the full id), the next hint of that TODO (@p level: a given one; @p reset: start over).
/// The first hint of every ladder points at the lesson section that poses the problem; the last is
/// the whole recipe. @p lab may also name the TODO (`06.2`), as the lessons and skeletons write it.
int hint(const Paths& paths, const std::string& lab, const std::string& todo, int level, bool reset);

}  // namespace gpulab::cli
