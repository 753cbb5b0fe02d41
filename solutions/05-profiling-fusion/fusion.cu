/// @file fusion.cu
/// @brief Lab 05: napkin math of memory-bound operations, then fusion: softmax (the given
/// three-kernel chain, then one kernel with the online max and sum), LayerNorm forward (Welford)
/// and backward, and an attention forward whose score matrix never leaves the chip (fusion.hpp).
///
///   softmax, unfused (given)   row max; sum of exponentials; normalize: 4 reads and writes of MN
///   softmax, fused             one warp per row (≤ 1024, in registers), one block per row (in
///                              shared memory, up to softmax_on_chip_limit()), or an online pass
///                              and a normalizing pass (longer rows)
///   layernorm forward          one block per row: Welford per thread, merged by Chan's formula
///   layernorm backward         dx per row; dγ, dβ as per-block partial sums, then one reduction
///   attention forward          16 queries per block against 64-key tiles of K and V in shared
///                              memory, online softmax across tiles (stretch)
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "fusion.hpp"
#include "gpulab/check.hpp"
#include "gpulab/device_buffer.hpp"
#include "nvtx_range.hpp"

namespace lab05 {

// ---------------------------------------------------------------------------------------------
// 05.1 Napkin math
// ---------------------------------------------------------------------------------------------

// BEGIN SOLUTION(05.1) Bytes and FLOPs of each operation, and the roofline's bound
Cost softmax_cost(long long rows, long long cols, bool fused) {
  const double mn = static_cast<double>(rows) * static_cast<double>(cols), m = static_cast<double>(rows);
  Cost c;
  c.flops = 5.0 * mn;
  if (fused) {
    c.bytes_read = 4.0 * mn;
    c.bytes_written = 4.0 * mn;
  } else {
    // max: x → m; sum: x, m → s; normalize: x, m, s → y
    c.bytes_read = 4.0 * (3.0 * mn + 3.0 * m);
    c.bytes_written = 4.0 * (mn + 2.0 * m);
  }
  return c;
}

Cost layernorm_forward_cost(long long rows, long long cols) {
  const double mn = static_cast<double>(rows) * static_cast<double>(cols);
  return {4.0 * (mn + 2.0 * static_cast<double>(cols)), 4.0 * (mn + 2.0 * static_cast<double>(rows)), 8.0 * mn};
}

Cost layernorm_backward_cost(long long rows, long long cols) {
  const double mn = static_cast<double>(rows) * static_cast<double>(cols), m = static_cast<double>(rows), n = static_cast<double>(cols);
  return {4.0 * (2.0 * mn + n + 2.0 * m), 4.0 * (mn + 2.0 * n), 11.0 * mn};
}

Cost attention_cost(long long heads, long long seq, long long dim, bool causal, bool materialized) {
  const double h = static_cast<double>(heads), s = static_cast<double>(seq), d = static_cast<double>(dim);
  const double scores = causal ? s * (s + 1.0) / 2.0 : s * s;
  Cost c;
  c.flops = h * 4.0 * d * scores;
  c.bytes_read = 4.0 * h * 3.0 * s * d;        // Q, K, V
  c.bytes_written = 4.0 * h * (s * d + s);     // O, log-sum-exp
  if (materialized) {                          // S written, read; P written, read
    c.bytes_read += 4.0 * h * 2.0 * s * s;
    c.bytes_written += 4.0 * h * 2.0 * s * s;
  }
  return c;
}

double roofline_seconds(const Cost& cost, double peak_flops, double peak_bytes_per_s) {
  return std::max(cost.flops / peak_flops, (cost.bytes_read + cost.bytes_written) / peak_bytes_per_s);
}
// STUB: Cost softmax_cost(long long, long long, bool) { return {}; }
// STUB: Cost layernorm_forward_cost(long long, long long) { return {}; }
// STUB: Cost layernorm_backward_cost(long long, long long) { return {}; }
// STUB: Cost attention_cost(long long, long long, long long, bool, bool) { return {}; }
// STUB: double roofline_seconds(const Cost&, double, double) { return 0.0; }
// END SOLUTION

namespace {

// ---------------------------------------------------------------------------------------------
// Warp and block reductions (given)
// ---------------------------------------------------------------------------------------------

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// The maximum / sum of every thread's @p v in the block (blockDim.x a multiple of 32, ≤ 1024),
/// returned to every thread. @p scratch: 32 floats of shared memory; reusable after it returns.
__device__ float block_max(float v, float* scratch) {
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32), warps = static_cast<int>(blockDim.x / 32);
  v = warp_max(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  v = warp_max(v);
  __syncthreads();  // scratch may be written again by the caller's next reduction
  return v;
}
__device__ float block_sum(float v, float* scratch) {
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32), warps = static_cast<int>(blockDim.x / 32);
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  v = warp_sum(v);
  __syncthreads();
  return v;
}

// ---------------------------------------------------------------------------------------------
// The device's properties, asked once per device (given)
// ---------------------------------------------------------------------------------------------

/// @p attr of the current device. Each query is a driver call: a launcher that runs in a timing
/// loop asks once per device, not once per launch.
int device_attribute(cudaDeviceAttr attr) {
  static std::mutex lock;
  static std::map<std::pair<int, int>, int> known;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> hold(lock);
  const std::pair<int, int> key{device, static_cast<int>(attr)};
  if (const auto it = known.find(key); it != known.end()) return it->second;
  int value = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, device));
  return known[key] = value;
}

/// Lets @p kernel launch with @p bytes of dynamic shared memory on the current device
/// (cudaFuncSetAttribute), calling the driver only when it allows less so far.
void allow_dynamic_shared(const void* kernel, int bytes) {
  static std::mutex lock;
  static std::map<std::pair<int, const void*>, int> allowed;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> hold(lock);
  int& now = allowed[{device, kernel}];
  if (bytes <= now) return;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  now = bytes;
}

// ---------------------------------------------------------------------------------------------
// Softmax, unfused (given): three kernels, one block per row
// ---------------------------------------------------------------------------------------------

constexpr int kRowThreads = 256;

__global__ void softmax_row_max(const float* x, float* row_max, int rows, int cols) {
  __shared__ float scratch[32];
  for (int r = static_cast<int>(blockIdx.x); r < rows; r += static_cast<int>(gridDim.x)) {
    const float* xr = x + static_cast<std::size_t>(r) * cols;
    float m = -INFINITY;
    for (int c = static_cast<int>(threadIdx.x); c < cols; c += static_cast<int>(blockDim.x)) m = fmaxf(m, xr[c]);
    m = block_max(m, scratch);
    if (threadIdx.x == 0) row_max[r] = m;
  }
}

__global__ void softmax_row_sum_exp(const float* x, const float* row_max, float* row_sum, int rows, int cols) {
  __shared__ float scratch[32];
  for (int r = static_cast<int>(blockIdx.x); r < rows; r += static_cast<int>(gridDim.x)) {
    const float* xr = x + static_cast<std::size_t>(r) * cols;
    const float m = row_max[r];
    float s = 0.0f;
    for (int c = static_cast<int>(threadIdx.x); c < cols; c += static_cast<int>(blockDim.x)) s += expf(xr[c] - m);
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) row_sum[r] = s;
  }
}

__global__ void softmax_normalize(const float* x, const float* row_max, const float* row_sum, float* y, int rows, int cols) {
  for (int r = static_cast<int>(blockIdx.x); r < rows; r += static_cast<int>(gridDim.x)) {
    const std::size_t base = static_cast<std::size_t>(r) * cols;
    const float m = row_max[r], inv = 1.0f / row_sum[r];
    for (int c = static_cast<int>(threadIdx.x); c < cols; c += static_cast<int>(blockDim.x)) y[base + c] = expf(x[base + c] - m) * inv;
  }
}

// ---------------------------------------------------------------------------------------------
// Softmax, fused
// ---------------------------------------------------------------------------------------------

/// Rows up to 32 × 32 = 1024 elements: one warp per row, each lane holding its 32 strided values.
constexpr int kWarpRowMax = 1024;

// BEGIN SOLUTION(05.2) The fused softmax: one read and one write per element where the row fits on chip, online max and sum where it does not
/// A running (max, sum of exp(x − max)) pair: merging two rescales the smaller-max side's sum
/// (Milakov & Gimelshein, "Online normalizer calculation for softmax", 2018). A side that has
/// seen only −∞ has sum 0 and contributes nothing (exp(−∞ − −∞) would be NaN). A NaN is sticky:
/// fmaxf would drop it, so it is caught first.
struct MaxSum {
  float m, s;
};
__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  if (a.m != a.m || b.m != b.m) return {NAN, NAN};  // a NaN anywhere makes the row NaN
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0f};
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}
__device__ MaxSum block_merge(MaxSum v, float* scratch_m, float* scratch_s) {
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32), warps = static_cast<int>(blockDim.x / 32);
  for (int o = 16; o > 0; o >>= 1) v = merge(v, {__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)});
  if (lane == 0) {
    scratch_m[warp] = v.m;
    scratch_s[warp] = v.s;
  }
  __syncthreads();
  v = lane < warps ? MaxSum{scratch_m[lane], scratch_s[lane]} : MaxSum{-INFINITY, 0.0f};
  for (int o = 16; o > 0; o >>= 1) v = merge(v, {__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)});
  __syncthreads();
  return v;
}

/// Short rows: a warp per row, the row in registers (x read once, y written once).
__global__ void softmax_fused_warp(const float* x, float* y, int rows, int cols) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int warps = static_cast<int>(gridDim.x * blockDim.x / 32);
  for (int r = static_cast<int>((blockIdx.x * blockDim.x + threadIdx.x) / 32); r < rows; r += warps) {
    const float* xr = x + static_cast<std::size_t>(r) * cols;
    float v[kWarpRowMax / 32];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < kWarpRowMax / 32; ++i) {
      const int c = lane + 32 * i;
      v[i] = c < cols ? xr[c] : -INFINITY;
      m = fmaxf(m, v[i]);
    }
    m = warp_max(m);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < kWarpRowMax / 32; ++i) {
      v[i] = lane + 32 * i < cols ? expf(v[i] - m) : 0.0f;
      s += v[i];
    }
    const float inv = 1.0f / warp_sum(s);
    float* yr = y + static_cast<std::size_t>(r) * cols;
#pragma unroll
    for (int i = 0; i < kWarpRowMax / 32; ++i) {
      const int c = lane + 32 * i;
      if (c < cols) yr[c] = v[i] * inv;
    }
  }
}

/// Rows up to the on-chip limit: a block per row, the row in dynamic shared memory. With @p vec
/// (cols a multiple of 4, x and y 16-byte aligned) every access moves a float4, four loads in
/// flight per thread per unrolled step: a scalar loop keeps too few bytes in flight to reach
/// DRAM's bandwidth with one block per row.
__global__ void softmax_fused_block(const float* x, float* y, int rows, int cols, bool vec) {
  extern __shared__ float4 row4[];
  float* row = reinterpret_cast<float*>(row4);
  __shared__ float scratch[32];
  const int t = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
  const int n4 = vec ? cols / 4 : 0;  // float4s; the scalar loops take the rest (all of it without vec)
  for (int r = static_cast<int>(blockIdx.x); r < rows; r += static_cast<int>(gridDim.x)) {
    const float* xr = x + static_cast<std::size_t>(r) * cols;
    const float4* xr4 = reinterpret_cast<const float4*>(xr);
    float m = -INFINITY;
#pragma unroll 4
    for (int c = t; c < n4; c += threads) {
      const float4 v = xr4[c];
      row4[c] = v;
      m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
    }
    for (int c = 4 * n4 + t; c < cols; c += threads) {
      row[c] = xr[c];
      m = fmaxf(m, row[c]);
    }
    m = block_max(m, scratch);
    float s = 0.0f;
    // Each thread rewrites only its own elements: no barrier needed.
    for (int c = t; c < n4; c += threads) {
      float4 v = row4[c];
      v = {expf(v.x - m), expf(v.y - m), expf(v.z - m), expf(v.w - m)};
      row4[c] = v;
      s += (v.x + v.y) + (v.z + v.w);
    }
    for (int c = 4 * n4 + t; c < cols; c += threads) {
      row[c] = expf(row[c] - m);
      s += row[c];
    }
    const float inv = 1.0f / block_sum(s, scratch);
    float* yr = y + static_cast<std::size_t>(r) * cols;
    float4* yr4 = reinterpret_cast<float4*>(yr);
#pragma unroll 4
    for (int c = t; c < n4; c += threads) {
      const float4 v = row4[c];
      yr4[c] = {v.x * inv, v.y * inv, v.z * inv, v.w * inv};
    }
    for (int c = 4 * n4 + t; c < cols; c += threads) yr[c] = row[c] * inv;
    __syncthreads();  // the next row overwrites row[]
  }
}

/// Longer rows: one online pass for (max, sum), then a normalizing pass that reads x again.
__global__ void softmax_fused_online(const float* x, float* y, int rows, int cols) {
  __shared__ float scratch_m[32], scratch_s[32];
  for (int r = static_cast<int>(blockIdx.x); r < rows; r += static_cast<int>(gridDim.x)) {
    const float* xr = x + static_cast<std::size_t>(r) * cols;
    MaxSum v{-INFINITY, 0.0f};
    for (int c = static_cast<int>(threadIdx.x); c < cols; c += static_cast<int>(blockDim.x)) v = merge(v, {xr[c], 1.0f});
    v = block_merge(v, scratch_m, scratch_s);
    const float inv = 1.0f / v.s;
    float* yr = y + static_cast<std::size_t>(r) * cols;
    for (int c = static_cast<int>(threadIdx.x); c < cols; c += static_cast<int>(blockDim.x)) yr[c] = expf(xr[c] - v.m) * inv;
  }
}

/// Shared memory per block the block kernel may use for a row (the device's opt-in limit, less
/// the static scratch and a margin).
long long on_chip_floats() {
#if defined(GPULAB_EMULATOR)
  const int optin = 232448;
#else
  const int optin = device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin);
#endif
  return (optin - 1024) / static_cast<long long>(sizeof(float));
}

void softmax_fused(const float* x, float* y, int rows, int cols, int grid, cudaStream_t stream) {
  if (cols <= kWarpRowMax) {
    const int warps_per_block = kRowThreads / 32;
    softmax_fused_warp<<<(rows + warps_per_block - 1) / warps_per_block < grid * 8 ? (rows + warps_per_block - 1) / warps_per_block : grid * 8,
                         kRowThreads, 0, stream>>>(x, y, rows, cols);
  } else if (cols <= on_chip_floats()) {
    const std::size_t bytes = (static_cast<std::size_t>(cols) + 3) / 4 * sizeof(float4);
    const bool vec = cols % 4 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && reinterpret_cast<std::uintptr_t>(y) % 16 == 0;
    allow_dynamic_shared(reinterpret_cast<const void*>(softmax_fused_block), static_cast<int>(bytes));
    softmax_fused_block<<<rows < grid ? rows : grid, kRowThreads, bytes, stream>>>(x, y, rows, cols, vec);
  } else {
    softmax_fused_online<<<rows < grid ? rows : grid, kRowThreads * 4, 0, stream>>>(x, y, rows, cols);
  }
}
// STUB: long long on_chip_floats() { return 0; }
// STUB: void softmax_fused(const float*, float*, int, int, int, cudaStream_t) {}
// END SOLUTION

/// Device memory the launchers keep between calls (the chain's maxima and sums, LayerNorm
/// backward's partial sums), grown when a call needs more: allocating per call would put
/// cudaMalloc, cudaFree and a synchronization in every timed iteration. One set for the process:
/// these launchers are not for concurrent calls on different streams.
gpulab::DeviceBuffer<float>& workspace(int which, std::size_t floats) {
  static auto* buffers = new gpulab::DeviceBuffer<float>[4];  // never freed: it may outlive the CUDA runtime at exit
  gpulab::DeviceBuffer<float>& b = buffers[which];
  if (b.size() < floats) {
    CUDA_CHECK(cudaDeviceSynchronize());  // nothing may still use the smaller one
    b = gpulab::DeviceBuffer<float>(floats);
  }
  return b;
}

/// Blocks for row kernels: enough to fill the GPU a few times over (grid-stride over rows).
int row_grid() {
#if defined(GPULAB_EMULATOR)
  return 8;
#else
  return device_attribute(cudaDevAttrMultiProcessorCount) * 8;
#endif
}

void check_sizes(const char* what, int rows, int cols) {
  if (rows < 1 || cols < 1) {
    throw std::invalid_argument(std::string(what) + ": rows and cols must be at least 1 (got " + std::to_string(rows) + " x " +
                                std::to_string(cols) + ")");
  }
}

// ---------------------------------------------------------------------------------------------
// LayerNorm
// ---------------------------------------------------------------------------------------------

// BEGIN SOLUTION(05.3) LayerNorm forward: Welford in one pass, merged across the block
/// A running count, mean and sum of squared deviations (Welford 1962); two merge by Chan, Golub
/// and LeVeque (1979): n = na + nb, δ = mean_b − mean_a, mean = mean_a + δ·nb/n,
/// M2 = M2a + M2b + δ²·na·nb/n. No E[x²] − E[x]²: that cancels catastrophically when the mean
/// is large against the spread.
struct Welford {
  float n, mean, m2;
};
__device__ __forceinline__ Welford merge(Welford a, Welford b) {
  const float n = a.n + b.n;
  if (n == 0.0f) return a;
  const float delta = b.mean - a.mean, f = b.n / n;
  return {n, a.mean + delta * f, a.m2 + b.m2 + delta * delta * a.n * f};
}

/// A row of up to kLnHeld × blockDim values stays in registers: x is read from DRAM once, every
/// load of the row is in flight at once, and each thread's mean costs one division, not one per
/// element.
constexpr int kLnHeld = 32;

__global__ void layernorm_forward_kernel(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd, int rows,
                                         int cols, float eps) {
  __shared__ float scratch[3][32];
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32), warps = static_cast<int>(blockDim.x / 32);
  const int t = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
  // The same for every thread: no divergence. The held path strides by the compile-time
  // kRowThreads (the launcher's block), so each of its 32 loads is the row's base plus a constant
  // offset: one address register, not 32.
  const bool held = threads == kRowThreads && cols <= kLnHeld * kRowThreads;
  for (int r = static_cast<int>(blockIdx.x); r < rows; r += static_cast<int>(gridDim.x)) {
    const float* xr = x + static_cast<std::size_t>(r) * cols;
    Welford w{0.0f, 0.0f, 0.0f};
    float v[kLnHeld];
    if (held) {
      // Two passes over the thread's own values, from registers (exact and stable), then Chan's
      // merge across the block below.
      float sum = 0.0f;
      int n = 0;
#pragma unroll
      for (int i = 0; i < kLnHeld; ++i) {
        const int c = t + i * kRowThreads;
        v[i] = c < cols ? xr[c] : 0.0f;
        sum += v[i];
        n += c < cols ? 1 : 0;
      }
      if (n > 0) {
        const float mu = sum / static_cast<float>(n);
        float m2 = 0.0f;
#pragma unroll
        for (int i = 0; i < kLnHeld; ++i) {
          const float d = v[i] - mu;
          if (t + i * kRowThreads < cols) m2 += d * d;
        }
        w = {static_cast<float>(n), mu, m2};
      }
    } else {
      // Longer rows: Welford as the values stream by.
      for (int c = t; c < cols; c += threads) {
        const float value = xr[c];
        w.n += 1.0f;
        const float d = value - w.mean;
        w.mean += d / w.n;
        w.m2 += d * (value - w.mean);
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      w = merge(w, {__shfl_xor_sync(0xffffffffu, w.n, o), __shfl_xor_sync(0xffffffffu, w.mean, o), __shfl_xor_sync(0xffffffffu, w.m2, o)});
    }
    if (lane == 0) {
      scratch[0][warp] = w.n;
      scratch[1][warp] = w.mean;
      scratch[2][warp] = w.m2;
    }
    __syncthreads();
    w = lane < warps ? Welford{scratch[0][lane], scratch[1][lane], scratch[2][lane]} : Welford{0.0f, 0.0f, 0.0f};
    for (int o = 16; o > 0; o >>= 1) {
      w = merge(w, {__shfl_xor_sync(0xffffffffu, w.n, o), __shfl_xor_sync(0xffffffffu, w.mean, o), __shfl_xor_sync(0xffffffffu, w.m2, o)});
    }
    __syncthreads();  // scratch is reused by the next row
    const float mu = w.mean, rs = rsqrtf(w.m2 / static_cast<float>(cols) + eps);
    if (threadIdx.x == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
    float* yr = y + static_cast<std::size_t>(r) * cols;
    if (held) {
#pragma unroll
      for (int i = 0; i < kLnHeld; ++i) {
        const int c = t + i * kRowThreads;
        if (c < cols) yr[c] = (v[i] - mu) * rs * gamma[c] + beta[c];
      }
    } else {
      // The second read of the row hits L2 (the block read it a moment ago); DRAM sees it once.
      for (int c = t; c < cols; c += threads) yr[c] = (xr[c] - mu) * rs * gamma[c] + beta[c];
    }
  }
}
// STUB: __global__ void layernorm_forward_kernel(const float*, const float*, const float*, float*, float*, float*, int, int, float) {}
// END SOLUTION

// BEGIN SOLUTION(05.4) LayerNorm backward: dx per row, dgamma and dbeta as per-block partial sums
/// dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) with g = dy·γ (the derivative of y = x̂·γ + β through
/// the mean and the variance). dγ and dβ: each block sums its rows' dy·x̂ and dy per column where
/// only it can see them — in shared memory when 2·cols floats fit (@p on_chip), else in its own
/// row of the partials — and writes its row of partial sums once; then one kernel sums the
/// partials column by column. Few blocks (two per SM) keep the partials small enough for L2.
__global__ void layernorm_backward_rows(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd, float* dx,
                                        float* partial_dgamma, float* partial_dbeta, int rows, int cols, bool on_chip) {
  extern __shared__ float sums[];  // on chip: dγ's then dβ's partial row, 2·cols floats
  __shared__ float scratch[32];
  const int t = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
  float* out_g = partial_dgamma + static_cast<std::size_t>(blockIdx.x) * cols;
  float* out_b = partial_dbeta + static_cast<std::size_t>(blockIdx.x) * cols;
  float* pg = on_chip ? sums : out_g;
  float* pb = on_chip ? sums + cols : out_b;
  // Every loop below gives thread t the same columns (t, t + threads, ...): no other thread reads
  // or writes them, so no barrier is needed around the partial sums.
  for (int c = t; c < cols; c += threads) pg[c] = pb[c] = 0.0f;
  for (int r = static_cast<int>(blockIdx.x); r < rows; r += static_cast<int>(gridDim.x)) {
    const std::size_t base = static_cast<std::size_t>(r) * cols;
    const float mu = mean[r], rs = rstd[r];
    float sum_g = 0.0f, sum_gx = 0.0f;
#pragma unroll 4
    for (int c = t; c < cols; c += threads) {
      const float xhat = (x[base + c] - mu) * rs, d = dy[base + c], g = d * gamma[c];
      sum_g += g;
      sum_gx += g * xhat;
      pg[c] += d * xhat;
      pb[c] += d;
    }
    const float mean_g = block_sum(sum_g, scratch) / static_cast<float>(cols);
    const float mean_gx = block_sum(sum_gx, scratch) / static_cast<float>(cols);
    // The row's second read comes from L1/L2 (this block read it a moment ago).
#pragma unroll 4
    for (int c = t; c < cols; c += threads) {
      const float xhat = (x[base + c] - mu) * rs;
      dx[base + c] = rs * (dy[base + c] * gamma[c] - mean_g - xhat * mean_gx);
    }
  }
  if (on_chip) {
    for (int c = t; c < cols; c += threads) {
      out_g[c] = pg[c];
      out_b[c] = pb[c];
    }
  }
}

/// dγ[c] = Σ_b partial_dgamma[b][c] (and dβ): one thread per column, consecutive threads on
/// consecutive columns, small blocks so that every SM has columns to sum.
__global__ void layernorm_backward_columns(const float* partial_dgamma, const float* partial_dbeta, float* dgamma, float* dbeta, int blocks,
                                           int cols) {
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= cols) return;
  float g = 0.0f, b = 0.0f;
  for (int k = 0; k < blocks; ++k) {
    g += partial_dgamma[static_cast<std::size_t>(k) * cols + c];
    b += partial_dbeta[static_cast<std::size_t>(k) * cols + c];
  }
  dgamma[c] = g;
  dbeta[c] = b;
}

void layernorm_backward_launch(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd, float* dx,
                               float* dgamma, float* dbeta, int rows, int cols, int grid, cudaStream_t stream) {
  (void)grid;  // not the rows' grid: two blocks per SM, so that the partials stay in L2
#if defined(GPULAB_EMULATOR)
  const int sms = 4;
#else
  const int sms = device_attribute(cudaDevAttrMultiProcessorCount);
#endif
  const int blocks = rows < 2 * sms ? rows : 2 * sms;
  // On chip when two blocks' 2·cols floats fit in an SM's shared memory.
  const bool on_chip = 2 * static_cast<long long>(cols) <= on_chip_floats() / 2;
  const std::size_t bytes = on_chip ? 2 * static_cast<std::size_t>(cols) * sizeof(float) : 0;
  if (on_chip) allow_dynamic_shared(reinterpret_cast<const void*>(layernorm_backward_rows), static_cast<int>(bytes));
  float* partial_g = workspace(2, static_cast<std::size_t>(blocks) * cols).data();
  float* partial_b = workspace(3, static_cast<std::size_t>(blocks) * cols).data();
  layernorm_backward_rows<<<blocks, kRowThreads, bytes, stream>>>(dy, x, gamma, mean, rstd, dx, partial_g, partial_b, rows, cols, on_chip);
  CUDA_CHECK(cudaGetLastError());
  layernorm_backward_columns<<<(cols + 63) / 64, 64, 0, stream>>>(partial_g, partial_b, dgamma, dbeta, blocks, cols);
  CUDA_CHECK(cudaGetLastError());
}
// STUB: void layernorm_backward_launch(const float*, const float*, const float*, const float*, const float*, float*, float*, float*, int, int, int, cudaStream_t) {}
// END SOLUTION

// ---------------------------------------------------------------------------------------------
// Attention forward (stretch)
// ---------------------------------------------------------------------------------------------

constexpr int kQueriesPerBlock = 16, kAttentionThreads = 128;

// BEGIN SOLUTION(05.5) Attention forward: K and V tiles in shared memory, online softmax, O written once
/// Each of the 4 warps owns 4 of the block's 16 queries. Per tile of kKeysPerTile keys (64 at
/// dim 64, 32 at dim 128, so that a tile fits in Turing's 64 KB), lane j scores keys j, j + 32, …
/// against all of its warp's queries at once, so that each K and V value read from shared memory
/// serves 4 queries. K's rows are padded by 4 floats: a row stays 16-byte aligned for float4
/// reads, and the 8 lanes of a float4 read's quarter-warp read 8 consecutive rows, each 4 banks
/// on from the last, so they cover the 32 banks once. The warp takes the tile's max per query,
/// rescales its running sum and output by exp(old max − new max), and adds p·V with p broadcast
/// by shuffles; each lane owns dim / 32 columns of each output row.
template <int kDim, int kKeysPerTile>
__global__ void __launch_bounds__(kAttentionThreads) attention_forward_kernel(const float* Q, const float* K, const float* V, float* O, float* lse,
                                                                               int seq, bool causal) {
  extern __shared__ float smem[];
  float* Qs = smem;                                // [16][kDim]
  constexpr int kKStride = kDim + 4;
  float* Ks = Qs + kQueriesPerBlock * kDim;        // [kKeysPerTile][kKStride]
  float* Vs = Ks + kKeysPerTile * kKStride;        // [kKeysPerTile][kDim]
  constexpr int kScores = kKeysPerTile / 32;       // per lane and query
  const int head = static_cast<int>(blockIdx.y), q0 = static_cast<int>(blockIdx.x) * kQueriesPerBlock;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const std::size_t head_base = static_cast<std::size_t>(head) * seq * kDim;
  const float scale = rsqrtf(static_cast<float>(kDim));
  for (int i = static_cast<int>(threadIdx.x); i < kQueriesPerBlock * kDim; i += kAttentionThreads) {
    const int q = q0 + i / kDim;
    Qs[i] = q < seq ? Q[head_base + static_cast<std::size_t>(q) * kDim + i % kDim] * scale : 0.0f;
  }
  constexpr int kRows = kQueriesPerBlock / (kAttentionThreads / 32), kCols = kDim / 32;
  // Registers only if every index into m, l, o, s and p is a constant: every loop over them is
  // unrolled (a loop left rolled puts them on the stack, in local memory).
  float m[kRows], l[kRows], o[kRows][kCols];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int j = 0; j < kCols; ++j) o[r][j] = 0.0f;
  }
  const int last_key = causal ? (q0 + kQueriesPerBlock - 1 < seq ? q0 + kQueriesPerBlock - 1 : seq - 1) : seq - 1;
  for (int k0 = 0; k0 <= last_key; k0 += kKeysPerTile) {
    __syncthreads();  // the previous tile is no longer read
    for (int i = static_cast<int>(threadIdx.x); i < kKeysPerTile * kDim; i += kAttentionThreads) {
      const int key = k0 + i / kDim, d = i % kDim;
      const bool in = key < seq;
      Ks[(i / kDim) * kKStride + d] = in ? K[head_base + static_cast<std::size_t>(key) * kDim + d] : 0.0f;
      Vs[i] = in ? V[head_base + static_cast<std::size_t>(key) * kDim + d] : 0.0f;
    }
    __syncthreads();
    // The warp's kRows queries together: each K and V value a lane reads from shared memory serves
    // all of them (kRows FMAs a load, not one), and each float4 of Q, a broadcast, serves every key
    // the lane scores.
    float p[kRows][kScores];  // the scores, then the probabilities
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int h = 0; h < kScores; ++h) p[r][h] = 0.0f;
    }
#pragma unroll 4
    for (int d = 0; d < kDim; d += 4) {
      float4 qv[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) qv[r] = *reinterpret_cast<const float4*>(Qs + (warp * kRows + r) * kDim + d);
#pragma unroll
      for (int h = 0; h < kScores; ++h) {
        const float4 kv = *reinterpret_cast<const float4*>(Ks + (lane + 32 * h) * kKStride + d);
#pragma unroll
        for (int r = 0; r < kRows; ++r) p[r][h] = fmaf(qv[r].w, kv.w, fmaf(qv[r].z, kv.z, fmaf(qv[r].y, kv.y, fmaf(qv[r].x, kv.x, p[r][h]))));
      }
    }
#pragma unroll
    for (int h = 0; h < kScores; ++h) {
      const int key = k0 + lane + 32 * h;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int q = q0 + warp * kRows + r;
        if (!(key < seq && (!causal || key <= q))) p[r][h] = -INFINITY;
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int h = 0; h < kScores; ++h) tile_max = fmaxf(tile_max, p[r][h]);
      const float new_m = fmaxf(m[r], warp_max(tile_max));
      // Every score so far −∞ (key 0 is visible to every query, so only −∞ or NaN scores do
      // this): p = 0 and m, l and o stay as they are, where exp(−∞ − (−∞)) would be NaN.
      const bool seen = new_m != -INFINITY;
      const float rescale = seen ? expf(m[r] - new_m) : 1.0f;  // exp(−∞) = 0 on the first visible tile
      float p_sum = 0.0f;
#pragma unroll
      for (int h = 0; h < kScores; ++h) {
        p[r][h] = seen ? expf(p[r][h] - new_m) : 0.0f;
        p_sum += p[r][h];
      }
      l[r] = l[r] * rescale + warp_sum(p_sum);
      m[r] = seen ? new_m : m[r];
#pragma unroll
      for (int j = 0; j < kCols; ++j) o[r][j] *= rescale;
    }
    // Key kj = 32·h + src: its p lives in lane src's p[r][h] (h a constant once unrolled).
#pragma unroll
    for (int h = 0; h < kScores; ++h) {
#pragma unroll 8
      for (int src = 0; src < 32; ++src) {
        float pk[kRows];
#pragma unroll
        for (int r = 0; r < kRows; ++r) pk[r] = __shfl_sync(0xffffffffu, p[r][h], src);
        const float* vrow = Vs + (32 * h + src) * kDim + lane;
#pragma unroll
        for (int j = 0; j < kCols; ++j) {
          const float v = vrow[32 * j];
#pragma unroll
          for (int r = 0; r < kRows; ++r) o[r][j] += pk[r] * v;
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int q = q0 + warp * kRows + r;
    if (q >= seq) continue;
    const float inv = 1.0f / l[r];
#pragma unroll
    for (int j = 0; j < kCols; ++j) O[head_base + static_cast<std::size_t>(q) * kDim + lane + 32 * j] = o[r][j] * inv;
    if (lane == 0) lse[static_cast<std::size_t>(head) * seq + q] = m[r] + logf(l[r]);
  }
}

/// dim 64: 64-key tiles (37 888 B of shared memory); dim 128: 32-key tiles (41 472 B; 64-key ones,
/// 74 752 B, would not fit in Turing's 64 KB).
template <int kDim>
void attention_launch(const float* Q, const float* K, const float* V, float* O, float* lse, int heads, int seq, bool causal, cudaStream_t stream) {
  constexpr int kTile = kDim == 64 ? 64 : 32;
  const std::size_t bytes = (kQueriesPerBlock * kDim + kTile * (kDim + 4) + kTile * kDim) * sizeof(float);
  allow_dynamic_shared(reinterpret_cast<const void*>(attention_forward_kernel<kDim, kTile>), static_cast<int>(bytes));
  const dim3 grid(static_cast<unsigned>((seq + kQueriesPerBlock - 1) / kQueriesPerBlock), static_cast<unsigned>(heads));
  attention_forward_kernel<kDim, kTile><<<grid, kAttentionThreads, bytes, stream>>>(Q, K, V, O, lse, seq, causal);
}
// STUB: template <int kDim>
// STUB: void attention_launch(const float*, const float*, const float*, float*, float*, int, int, bool, cudaStream_t) {}
// END SOLUTION

}  // namespace

// ---------------------------------------------------------------------------------------------
// The launchers (given): sizes, NVTX ranges (what `nsys` and `grade 05 --profile` group kernels by)
// ---------------------------------------------------------------------------------------------

long long softmax_on_chip_limit() { return on_chip_floats(); }

void softmax(Softmax variant, const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  check_sizes("softmax", rows, cols);
  const int grid = row_grid();
  if (variant == Softmax::kUnfused) {
    const NvtxRange range("softmax unfused");
    float* row_max = workspace(0, static_cast<std::size_t>(rows)).data();
    float* row_sum = workspace(1, static_cast<std::size_t>(rows)).data();
    const int blocks = rows < grid ? rows : grid;
    softmax_row_max<<<blocks, kRowThreads, 0, stream>>>(x, row_max, rows, cols);
    CUDA_CHECK(cudaGetLastError());
    softmax_row_sum_exp<<<blocks, kRowThreads, 0, stream>>>(x, row_max, row_sum, rows, cols);
    CUDA_CHECK(cudaGetLastError());
    softmax_normalize<<<blocks, kRowThreads, 0, stream>>>(x, row_max, row_sum, y, rows, cols);
    CUDA_CHECK(cudaGetLastError());
    return;
  }
  const NvtxRange range("softmax fused");
  softmax_fused(x, y, rows, cols, grid, stream);
  CUDA_CHECK(cudaGetLastError());
}

void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd, int rows, int cols, float eps,
                       cudaStream_t stream) {
  check_sizes("layernorm_forward", rows, cols);
  const NvtxRange range("layernorm forward");
  const int grid = row_grid();
  layernorm_forward_kernel<<<rows < grid ? rows : grid, kRowThreads, 0, stream>>>(x, gamma, beta, y, mean, rstd, rows, cols, eps);
  CUDA_CHECK(cudaGetLastError());
}

void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd, float* dx, float* dgamma,
                        float* dbeta, int rows, int cols, cudaStream_t stream) {
  check_sizes("layernorm_backward", rows, cols);
  const NvtxRange range("layernorm backward");
  layernorm_backward_launch(dy, x, gamma, mean, rstd, dx, dgamma, dbeta, rows, cols, row_grid(), stream);
}

void attention_forward(const float* Q, const float* K, const float* V, float* O, float* lse, int heads, int seq, int dim, bool causal,
                       cudaStream_t stream) {
  if (heads < 1 || seq < 1 || (dim != 64 && dim != 128)) {
    throw std::invalid_argument("attention_forward: heads and seq must be at least 1 and dim 64 or 128 (got " + std::to_string(heads) + ", " +
                                std::to_string(seq) + ", " + std::to_string(dim) + ")");
  }
  const NvtxRange range("attention forward fused");
  if (dim == 64) {
    attention_launch<64>(Q, K, V, O, lse, heads, seq, causal, stream);
  } else {
    attention_launch<128>(Q, K, V, O, lse, heads, seq, causal, stream);
  }
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace lab05
