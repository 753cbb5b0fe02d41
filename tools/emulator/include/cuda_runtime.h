// The CPU emulator's stand-in for the CUDA runtime API (tools/emulator/emu.hpp).
#pragma once
#include "../emu.hpp"
