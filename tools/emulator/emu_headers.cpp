/// @file emu_headers.cpp
/// @brief Every header of the CPU block emulator, compiled once with the house warnings (-Wall
/// -Wextra -Werror, cmake/GpulabWarnings.cmake), so that the emulator's own code is linted where
/// the lab sources it runs (rewritten CUDA) are not.
#include "emu.hpp"
#include "emu_tensor.hpp"
#include "include/cublas_v2.h"
#include "include/cuda_fp16.h"
#include "include/cuda_runtime.h"
#include "include/cuda_runtime_api.h"
#include "include/mma.h"
