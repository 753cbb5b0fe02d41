// The CPU emulator's stand-in for the CUDA runtime API (scripts/emu/emu.hpp).
#pragma once
#include "../emu.hpp"
