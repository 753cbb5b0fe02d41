// The CPU emulator's stand-in for cuBLAS: the calls lab 03's tests make, computed on the CPU
// (column-major, as cuBLAS is; fp64 accumulation rounded once, so it is at least as accurate as
// an fp32 GEMM).
#pragma once
#include <vector>

#include "../emu.hpp"

using cublasHandle_t = struct EmuCublas*;
enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7, CUBLAS_STATUS_NOT_SUPPORTED = 15 };
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0, CUBLAS_PEDANTIC_MATH = 2, CUBLAS_TF32_TENSOR_OP_MATH = 3 };

inline cublasStatus_t cublasCreate(cublasHandle_t* h) {
  *h = reinterpret_cast<cublasHandle_t>(new char(0));
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasDestroy(cublasHandle_t h) {
  delete reinterpret_cast<char*>(h);
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
/// C (m × n, column-major, ldc) = alpha · A (m × k, lda) · B (k × n, ldb) + beta · C; no transposes.
inline cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                  const float* alpha, const float* A, int lda, const float* B, int ldb, const float* beta,
                                  float* C, int ldc) {
  if (ta != CUBLAS_OP_N || tb != CUBLAS_OP_N) return CUBLAS_STATUS_NOT_SUPPORTED;
  std::vector<double> column(m);
  for (int j = 0; j < n; ++j) {
    std::fill(column.begin(), column.end(), 0.0);
    for (int p = 0; p < k; ++p) {
      const double b = B[p + static_cast<std::size_t>(j) * ldb];
      const float* a = A + static_cast<std::size_t>(p) * lda;
      for (int i = 0; i < m; ++i) column[i] += a[i] * b;
    }
    float* c = C + static_cast<std::size_t>(j) * ldc;
    for (int i = 0; i < m; ++i) c[i] = static_cast<float>(*alpha * column[i] + (*beta == 0.0f ? 0.0 : *beta * static_cast<double>(c[i])));
  }
  return CUBLAS_STATUS_SUCCESS;
}
