// The CPU emulator's stand-in for cuBLAS: the calls lab 03's and lab 04's tests make, computed on the CPU
// (column-major, as cuBLAS is; fp64 accumulation rounded once, so it is at least as accurate as
// an fp32 GEMM).
#pragma once
#include <vector>

#include "../emu.hpp"
#include "cuda_fp16.h"

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

enum cudaDataType { CUDA_R_32F = 0, CUDA_R_16F = 2 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };
/// C (m × n, column-major, fp32) = alpha · A (m × k, fp16) · B (k × n, fp16) + beta · C, summed in
/// fp64 and rounded once; no transposes, only fp16 inputs with an fp32 output (lab 04's baseline).
inline cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* alpha,
                                   const void* A, cudaDataType a_type, int lda, const void* B, cudaDataType b_type, int ldb,
                                   const void* beta, void* C, cudaDataType c_type, int ldc, cublasComputeType_t, cublasGemmAlgo_t) {
  if (ta != CUBLAS_OP_N || tb != CUBLAS_OP_N || a_type != CUDA_R_16F || b_type != CUDA_R_16F || c_type != CUDA_R_32F) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  const __half* a = static_cast<const __half*>(A);
  const __half* b = static_cast<const __half*>(B);
  float* c = static_cast<float*>(C);
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  std::vector<float> af(static_cast<std::size_t>(lda) * k);  // converted once: halves are slow to convert here
  for (std::size_t x = 0; x < af.size(); ++x) af[x] = __half2float(a[x]);
  std::vector<double> column(m);
  for (int j = 0; j < n; ++j) {
    std::fill(column.begin(), column.end(), 0.0);
    for (int p = 0; p < k; ++p) {
      const double bv = __half2float(b[p + static_cast<std::size_t>(j) * ldb]);
      const float* ap = af.data() + static_cast<std::size_t>(p) * lda;
      for (int i = 0; i < m; ++i) column[i] += static_cast<double>(ap[i]) * bv;
    }
    float* cj = c + static_cast<std::size_t>(j) * ldc;
    for (int i = 0; i < m; ++i) cj[i] = static_cast<float>(al * column[i] + (be == 0.0f ? 0.0 : be * static_cast<double>(cj[i])));
  }
  return CUBLAS_STATUS_SUCCESS;
}

/// C_i = alpha · op(A_i) · op(B_i) + beta · C_i for i < batch, column-major with strides between
/// the matrices (lab 05's unfused attention baseline), summed in fp64.
inline cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float* alpha,
                                                const float* A, int lda, long long stride_a, const float* B, int ldb, long long stride_b,
                                                const float* beta, float* C, int ldc, long long stride_c, int batch) {
  for (int i = 0; i < batch; ++i) {
    const float* a = A + i * stride_a;
    const float* b = B + i * stride_b;
    float* c = C + i * stride_c;
    for (int col = 0; col < n; ++col) {
      for (int row = 0; row < m; ++row) {
        double sum = 0;
        for (int p = 0; p < k; ++p) {
          const double av = ta == CUBLAS_OP_N ? a[row + static_cast<std::size_t>(p) * lda] : a[p + static_cast<std::size_t>(row) * lda];
          const double bv = tb == CUBLAS_OP_N ? b[p + static_cast<std::size_t>(col) * ldb] : b[col + static_cast<std::size_t>(p) * ldb];
          sum += av * bv;
        }
        float& out = c[row + static_cast<std::size_t>(col) * ldc];
        out = static_cast<float>(*alpha * sum + (*beta == 0.0f ? 0.0 : *beta * static_cast<double>(out)));
      }
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}
