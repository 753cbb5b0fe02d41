/// @file nvtx_range.hpp
/// @brief Lab 05 — an NVTX range for the lifetime of an object: what Nsight Systems draws on its
/// timeline and `gpulab grade 05 --profile` groups kernels by ("softmax fused" must hold one
/// kernel). Given; the implementation is the tests' (nvtx_range.cpp), so your objects make no
/// loader calls.
#pragma once

namespace lab05 {

/// nvtxRangePushA(name) now, nvtxRangePop() when it goes out of scope (a no-op on the emulator).
class NvtxRange {
 public:
  explicit NvtxRange(const char* name);
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace lab05
