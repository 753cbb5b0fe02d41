/// @file hgemm.hpp
/// @brief Lab 04 — the HGEMM ladder on tensor cores: the functions you implement in
/// labs/04-tensor-cores/hgemm.cu.
///
/// This header belongs to the tests: do not change it. C = A · B with A (M × K) and B (K × N) in
/// fp16, C (M × N) in fp32, products summed in fp32 (what cuBLAS's cublasGemmEx computes with
/// CUDA_R_16F inputs and CUBLAS_COMPUTE_32F). Every matrix is row-major with no padding between
/// rows: A's row stride is K, B's N, C's N. Sizes are anything ≥ 1.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <string>

namespace lab04 {

/// The rungs, in the order of lesson 04. v1 is given as the worked example.
enum class Rung {
  kWmmaNaive = 1,  ///< v1 (given) WMMA, one warp per 16 × 16 tile of C, fragments loaded from global memory
  kWmmaShared,     ///< TODO(04.7) WMMA on 128 × 128 block tiles staged in shared memory
  kMmaLdmatrix,    ///< TODO(04.9) mma.sync m16n8k16 fed by ldmatrix from padded shared memory (sm_80+)
  kMmaPipelined,   ///< TODO(04.10) the same with a cp.async pipeline of 3 stages (sm_80+)
};

/// Number of rungs (v1 … v4).
inline constexpr int kRungs = 4;

/// Whether @p rung can run on the current device with the code this program was built with
/// (v3 and v4 need mma.m16n8k16 and cp.async: compute capability 8.0 and code compiled for it).
/// When not, @p why (if given) says why. Given.
bool rung_supported(Rung rung, std::string* why = nullptr);

/// C = A · B by the chosen rung, asynchronously on @p stream. The launcher pads: when M, N or K is
/// not a multiple of 16, or A or B is not 32-byte aligned (what WMMA loads need), it copies A and B into zero-padded
/// matrices (M, N, K rounded up to 16) first, so the kernels see 16-aligned operands; the copies
/// live in stream-ordered memory (cudaMallocAsync / cudaFreeAsync on @p stream), so the call never
/// waits and can be captured into a CUDA graph. C is written as it is, M × N. Throws std::invalid_argument when M, N or K < 1, std::runtime_error when
/// !rung_supported(rung).
void hgemm(Rung rung, int M, int N, int K, const __half* A, const __half* B, float* C, cudaStream_t stream = 0);

}  // namespace lab04
