/// @file flush.cu
/// @brief The L2 flush of bench(): a memset, then a read of the same bytes (see bench.hpp).
#include <cstdint>

#include "gpulab/bench.hpp"
#include "gpulab/check.hpp"

namespace gpulab {
namespace {

/// Reads every 16-byte word once; writes only when the impossible happens, so that the loads are
/// kept and nothing else is written.
__global__ void l2_read_kernel(const uint4* __restrict__ words, std::size_t count, unsigned* __restrict__ sink) {
  unsigned acc = 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const uint4 w = words[i];
    acc ^= w.x ^ w.y ^ w.z ^ w.w;
  }
  if (acc == 0x9E3779B9u) *sink = acc;  // the buffer is all 0x5A bytes: never true
}

}  // namespace

void flush_l2(unsigned char* buffer, std::size_t bytes, cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(buffer, 0x5A, bytes, stream));
  const std::size_t words = bytes / sizeof(uint4);
  if (words == 0) return;
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // The sink: the last word of the buffer itself (the kernel never writes it in practice).
  l2_read_kernel<<<static_cast<unsigned>(sms) * 4, 256, 0, stream>>>(reinterpret_cast<const uint4*>(buffer), words - 1,
                                                                    reinterpret_cast<unsigned*>(buffer + (words - 1) * sizeof(uint4)));
  CUDA_CHECK_LAUNCH();
}

}  // namespace gpulab
