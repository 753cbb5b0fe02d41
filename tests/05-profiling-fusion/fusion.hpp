/// @file fusion.hpp
/// @brief Lab 05 — profiling and fusion: the functions you implement in
/// labs/05-profiling-fusion/fusion.cu.
///
/// This header belongs to the tests: do not change it. Every matrix is row-major fp32 in device
/// memory with no padding between rows: x, y and dy are rows × cols; γ and β have cols elements;
/// mean and rstd have rows. Sizes are anything ≥ 1 (rows of 1 to 2¹⁶ + 1 elements and more).
#pragma once

#include <cuda_runtime_api.h>

namespace lab05 {

// ---------------------------------------------------------------------------------------------
// 05.1 Napkin math (host code, graded on any machine)
// ---------------------------------------------------------------------------------------------

/// What an operation moves to and from global memory and computes.
struct Cost {
  double bytes_read = 0;     ///< from global memory (each element once per pass that reads it)
  double bytes_written = 0;  ///< to global memory
  double flops = 0;          ///< by the counting rule of the function
};

/// Softmax of a rows × cols matrix (fp32). Unfused: the given three-kernel chain (row max: read x,
/// write the maxima; sum of exponentials: read x and the maxima, write the sums; normalize: read
/// x, the maxima and the sums, write y). Fused: read x once, write y once. FLOPs: 5 per element
/// in both (compare, subtract, exp, add, divide).
/// TODO(05.1)
Cost softmax_cost(long long rows, long long cols, bool fused);

/// LayerNorm forward, the minimum: read x, γ, β; write y, mean, rstd. FLOPs: 8 per element.
/// TODO(05.1)
Cost layernorm_forward_cost(long long rows, long long cols);

/// LayerNorm backward, the minimum: read dy, x, γ, mean, rstd; write dx, dγ, dβ. FLOPs: 11 per
/// element.
/// TODO(05.1)
Cost layernorm_backward_cost(long long rows, long long cols);

/// Attention forward over `heads` independent heads (batch × heads) of `seq` queries and keys of
/// dimension `dim`, fp32: read Q, K, V, write O and the log-sum-exp per query. FLOPs: the two
/// products only, 2·dim per score for Q·Kᵀ and 2·dim per score for P·V; `causal` computes only
/// the seq·(seq + 1)/2 scores on and below the diagonal. `materialized`: the score matrix goes
/// through global memory as the unfused chain does (Q·Kᵀ writes S, softmax reads S and writes P,
/// P·V reads P: four passes over seq² elements per head, causal or not, plus the log-sum-exp
/// written by the softmax); fused: it never does.
/// TODO(05.1)
Cost attention_cost(long long heads, long long seq, long long dim, bool causal, bool materialized);

/// The roofline's lower bound on the time of @p cost on a GPU of @p peak_flops FLOP/s and
/// @p peak_bytes_per_s of memory bandwidth: whichever of compute or memory takes longer, in seconds.
/// TODO(05.1)
double roofline_seconds(const Cost& cost, double peak_flops, double peak_bytes_per_s);

// ---------------------------------------------------------------------------------------------
// Softmax along each row: y = exp(x − max) / Σ exp(x − max)
// ---------------------------------------------------------------------------------------------

enum class Softmax {
  kUnfused = 1,  ///< (given) three kernels: row max, sum of exponentials, normalize
  kFused,        ///< TODO(05.2) one kernel: the online max and rescaled sum, one read where the row fits on chip
};

/// The longest row the fused softmax keeps on chip (read once): set by the device (shared memory
/// per block) and your kernel's design; longer rows take an online pass and a normalizing pass
/// (two reads, one write). TODO(05.2)
long long softmax_on_chip_limit();

/// y = softmax(x) along each row, asynchronously on @p stream. A row of −∞ but one finite value is
/// one-hot; NaN in, NaN out. Throws std::invalid_argument when rows or cols < 1.
void softmax(Softmax variant, const float* x, float* y, int rows, int cols, cudaStream_t stream = 0);

// ---------------------------------------------------------------------------------------------
// LayerNorm: y = (x − mean) · rstd · γ + β, rstd = 1 / √(var + eps), var the biased variance
// ---------------------------------------------------------------------------------------------

/// TODO(05.3): one pass over each row with Welford's running mean and M2, merged across threads;
/// saves mean and rstd for the backward. Throws std::invalid_argument when rows or cols < 1.
void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd, int rows, int cols,
                       float eps, cudaStream_t stream = 0);

/// TODO(05.4): dx, dγ = Σ_rows dy·x̂, dβ = Σ_rows dy, with x̂ = (x − mean)·rstd, from the saved
/// mean and rstd. dγ and dβ are overwritten (not accumulated into), reduced across rows without
/// atomics on the same address from every row.
void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd, float* dx, float* dgamma,
                        float* dbeta, int rows, int cols, cudaStream_t stream = 0);

// ---------------------------------------------------------------------------------------------
// Attention forward (stretch): O = softmax(Q·Kᵀ / √dim) · V per head, fp32
// ---------------------------------------------------------------------------------------------

/// TODO(05.5, stretch): Q, K, V, O are heads × seq × dim (dim 64 or 128); lse (heads × seq) gets
/// each query's log Σ exp(scores − 0) of its scaled scores (the log-sum-exp a backward pass
/// needs). Causal: query i sees keys 0 … i. The seq × seq score matrix never goes to global memory.
void attention_forward(const float* Q, const float* K, const float* V, float* O, float* lse, int heads, int seq, int dim, bool causal,
                       cudaStream_t stream = 0);

}  // namespace lab05
