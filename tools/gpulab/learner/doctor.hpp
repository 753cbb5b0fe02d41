/// @file doctor.hpp
/// @brief `gpulab doctor`: what this machine has, what is missing, and how to get it.
#pragma once

#include "base/lab_config.hpp"

namespace gpulab::cli {

/// Prints the table. Returns 0 when everything is there, 2 when only the GPU parts are missing
/// (the CPU checks still run), 1 when something the build needs is missing.
int doctor(const Paths& paths, bool brief = false);

}  // namespace gpulab::cli
