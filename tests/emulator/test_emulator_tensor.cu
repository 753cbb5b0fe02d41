/// @file test_emulator_tensor.cu
/// @brief The emulator's tensor-core instructions (tools/emulator/emu_tensor.hpp) and its WMMA
/// stand-in (tools/emulator/include/mma.h), checked against the PTX ISA's own tables, written out
/// below from the documentation (not from emu_tensor.hpp):
///   - "Matrix Fragments for mma.m16n8k16 with floating point type" (PTX ISA 9.7.x.5.8,
///     https://docs.nvidia.com/cuda/parallel-thread-execution/#warp-level-matrix-fragment-mma-16816-float),
///   - "Warp-level matrix load instruction: ldmatrix" (PTX ISA 9.7.x.5.15,
///     https://docs.nvidia.com/cuda/parallel-thread-execution/#warp-level-matrix-instructions-ldmatrix),
///   - "cp.async", "cp.async.commit_group", "cp.async.wait_group / cp.async.wait_all" (PTX ISA
///     9.7.x.25.3, https://docs.nvidia.com/cuda/parallel-thread-execution/#data-movement-and-conversion-instructions-cp-async),
///   - WMMA: the CUDA C++ Programming Guide ("Warp Matrix Functions"): the fragment layout is
///     unspecified, ldm a multiple of 8 (__half) or 4 (float), the pointer 256-bit aligned.
/// Each case launches a one- or two-warp kernel on the emulator. Built only for the emulator
/// (`gpulab-cli emu-transform`); the cases run on the CPU.
#include <catch2/catch.hpp>

#include <cuda_fp16.h>
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "emu_tensor.hpp"
#include "gpulab/check.hpp"

// ---------------------------------------------------------------------------------------------
// The PTX ISA tables, as the documentation writes them (groupID = %laneid >> 2,
// threadID_in_group = %laneid % 4). Element i of a fragment; two 16-bit elements per 32-bit
// register, "Elements (low to high)": register r holds elements 2r (low half) and 2r + 1 (high).
// ---------------------------------------------------------------------------------------------
namespace ptx_doc {

__host__ __device__ inline int group_id(int lane) { return lane >> 2; }
__host__ __device__ inline int thread_id_in_group(int lane) { return lane % 4; }

// Multiplicand A (.f16, 16 × 16), a0 … a7:
//   row = groupID for ai where 0 <= i < 2 || 4 <= i < 6, groupID + 8 otherwise
//   col = (threadID_in_group * 2) + (i & 0x1) for ai where i < 4, ... + 8 for ai where i >= 4
__host__ __device__ inline int a_row(int lane, int i) { return ((0 <= i && i < 2) || (4 <= i && i < 6)) ? group_id(lane) : group_id(lane) + 8; }
__host__ __device__ inline int a_col(int lane, int i) {
  return i < 4 ? thread_id_in_group(lane) * 2 + (i & 0x1) : thread_id_in_group(lane) * 2 + (i & 0x1) + 8;
}
// Multiplicand B (.f16, 16 × 8), b0 … b3:
//   row = (threadID_in_group * 2) + (i & 0x1) for bi where i < 2, ... + 8 for bi where i >= 2
//   col = groupID
__host__ __device__ inline int b_row(int lane, int i) {
  return i < 2 ? thread_id_in_group(lane) * 2 + (i & 0x1) : thread_id_in_group(lane) * 2 + (i & 0x1) + 8;
}
__host__ __device__ inline int b_col(int lane, int /*i*/) { return group_id(lane); }
// Accumulators C, D (.f32, 16 × 8), c0 … c3:
//   row = groupID for ci where i < 2, groupID + 8 for ci where i >= 2
//   col = (threadID_in_group * 2) + (i & 0x1) for ci where i = {0,..,3}
__host__ __device__ inline int c_row(int lane, int i) { return i < 2 ? group_id(lane) : group_id(lane) + 8; }
__host__ __device__ inline int c_col(int lane, int i) { return thread_id_in_group(lane) * 2 + (i & 0x1); }

// ldmatrix .m8n8 .b16 (PTX ISA, Figure "ldmatrix fragment layout for one 8x8 Matrix with 16-bit
// elements"): threads 8j … 8j+7 give addr 8j … 8j+7, the starts of the 8 rows of matrix j; "a
// group of four threads loads an entire row", thread 0 receiving the first fragment: lane l gets,
// in register j, row l / 4, elements 2(l % 4) and 2(l % 4) + 1 of matrix j. With .trans the
// matrix is loaded column-major: lane l gets row l / 4 of the transpose, i.e. elements
// (row 2(l % 4), col l / 4) and (row 2(l % 4) + 1, col l / 4) of the matrix as stored.
inline int ldmatrix_row(int lane, int e, bool trans) { return trans ? 2 * (lane % 4) + e : lane / 4; }
inline int ldmatrix_col(int lane, int e, bool trans) { return trans ? lane / 4 : 2 * (lane % 4) + e; }

}  // namespace ptx_doc

// Kernels with external linkage, as in test_emulator.cu.
namespace emu_tensor_test {

__host__ __device__ inline std::uint32_t pack_halves(__half lo, __half hi) {
  return static_cast<std::uint32_t>(__half_as_ushort(lo)) | static_cast<std::uint32_t>(__half_as_ushort(hi)) << 16;
}

/// Warp w multiplies its own A (16 × 16, row-major) by its own B (16 × 8, row-major: B[k * 8 + n])
/// and adds its C (16 × 8, row-major), each lane building its registers from the PTX table.
/// @p swap_a12 exchanges a[1] and a[2] (a plausible indexing slip) before the mma.
__global__ void mma_kernel(const __half* A, const __half* B, const float* C, float* D, bool swap_a12) {
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const __half* a_tile = A + warp * 256;
  const __half* b_tile = B + warp * 128;
  const float* c_tile = C + warp * 128;
  float* d_tile = D + warp * 128;
  std::uint32_t a[4], b[2];
  float c[4], d[4];
  for (int r = 0; r < 4; ++r) {
    const int lo = 2 * r, hi = 2 * r + 1;
    a[r] = pack_halves(a_tile[ptx_doc::a_row(lane, lo) * 16 + ptx_doc::a_col(lane, lo)],
                       a_tile[ptx_doc::a_row(lane, hi) * 16 + ptx_doc::a_col(lane, hi)]);
  }
  for (int r = 0; r < 2; ++r) {
    const int lo = 2 * r, hi = 2 * r + 1;
    b[r] = pack_halves(b_tile[ptx_doc::b_row(lane, lo) * 8 + ptx_doc::b_col(lane, lo)],
                       b_tile[ptx_doc::b_row(lane, hi) * 8 + ptx_doc::b_col(lane, hi)]);
  }
  for (int i = 0; i < 4; ++i) c[i] = c_tile[ptx_doc::c_row(lane, i) * 8 + ptx_doc::c_col(lane, i)];
  if (swap_a12) std::swap(a[1], a[2]);
  emu::mma_m16n8k16(d, a, b, c);
  for (int i = 0; i < 4; ++i) d_tile[ptx_doc::c_row(lane, i) * 8 + ptx_doc::c_col(lane, i)] = d[i];
}

/// Thread @p quitter (or none, -1) returns before the warp-wide mma.
__global__ void mma_early_exit_kernel(float* out, int quitter) {
  if (static_cast<int>(threadIdx.x) == quitter) return;
  std::uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  float c[4] = {1.0f, 1.0f, 1.0f, 1.0f}, d[4];
  emu::mma_m16n8k16(d, a, b, c);
  out[threadIdx.x] = d[0];
}

/// Thread @p quitter (or none, -1) returns before the warp-wide ldmatrix.
__global__ void ldmatrix_early_exit_kernel(std::uint32_t* out, int quitter) {
  __shared__ __align__(16) __half tile[16 * 16];
  for (int i = static_cast<int>(threadIdx.x); i < 256; i += static_cast<int>(blockDim.x)) tile[i] = __float2half(0.0f);
  __syncthreads();
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (static_cast<int>(threadIdx.x) == quitter) return;
  std::uint32_t r[4];
  emu::ldmatrix(r, 4, false, &tile[(lane % 16) * 16 + 8 * (lane / 16)]);
  out[threadIdx.x] = r[0];
}

/// ldmatrix .x4 from a shared 16 × 16 tile (copied from @p in); lane l gives the row address
/// &tile[row_of[l]][col_of[l]]; its four registers go to out[4l … 4l + 3].
__global__ void ldmatrix_kernel(const __half* in, const int* row_of, const int* col_of, bool trans, std::uint32_t* out) {
  __shared__ __align__(16) __half tile[16 * 16];
  for (int i = static_cast<int>(threadIdx.x); i < 256; i += static_cast<int>(blockDim.x)) tile[i] = in[i];
  __syncthreads();
  const int lane = static_cast<int>(threadIdx.x % 32);
  std::uint32_t r[4];
  emu::ldmatrix(r, 4, trans, &tile[row_of[lane] * 16 + col_of[lane]]);
  for (int j = 0; j < 4; ++j) out[lane * 4 + j] = r[j];
}

/// The two tables together, as a kernel uses them: A (16 × 16) by ldmatrix .x4 and B (16 × 16,
/// row-major K × N) by ldmatrix .x4.trans from shared memory, both with lane l pointing at row
/// l % 16, column 8 (l / 16); then one mma per 8-column half of D (16 × 16, row-major).
__global__ void ldmatrix_mma_kernel(const __half* A, const __half* B, float* D) {
  __shared__ __align__(16) __half a_tile[16 * 16];
  __shared__ __align__(16) __half b_tile[16 * 16];
  for (int i = static_cast<int>(threadIdx.x); i < 256; i += static_cast<int>(blockDim.x)) {
    a_tile[i] = A[i];
    b_tile[i] = B[i];
  }
  __syncthreads();
  const int lane = static_cast<int>(threadIdx.x % 32);
  std::uint32_t a[4], b[4];
  emu::ldmatrix(a, 4, false, &a_tile[(lane % 16) * 16 + 8 * (lane / 16)]);
  emu::ldmatrix(b, 4, true, &b_tile[(lane % 16) * 16 + 8 * (lane / 16)]);
  for (int half = 0; half < 2; ++half) {
    const std::uint32_t bh[2] = {b[2 * half], b[2 * half + 1]};  // k 0-7, k 8-15 of columns 8·half …
    const float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    float d[4];
    emu::mma_m16n8k16(d, a, bh, c);
    for (int i = 0; i < 4; ++i) D[ptx_doc::c_row(lane, i) * 16 + 8 * half + ptx_doc::c_col(lane, i)] = d[i];
  }
}

constexpr int kObservations = 40;  // words each thread of cp_async_kernel records

/// Each thread copies from its own 8 source words into its own four 4-word slots and records what
/// the slots read at each step (out[t * kObservations + …]).
__global__ void cp_async_kernel(const unsigned* src, unsigned* out) {
  __shared__ __align__(16) unsigned stage[32 * 16];
  const int t = static_cast<int>(threadIdx.x);
  unsigned* slot = &stage[t * 16];
  const unsigned* mine = src + t * 8;
  for (int k = 0; k < 16; ++k) slot[k] = 0x12345678u;
  unsigned* o = out + t * kObservations;
  int n = 0;
  auto record = [&](int s) {
    for (int k = 0; k < 4; ++k) o[n++] = slot[s * 4 + k];
  };
  emu::cp_async(slot + 0, mine, 16, 16);
  emu::cp_async_commit();  // group 1: slot 0
  record(0);               // [0, 4): group 1 pending
  emu::cp_async(slot + 4, mine + 4, 16, 16);
  emu::cp_async_commit();  // group 2: slot 1
  emu::cp_async_wait(1);   // "till only 1 or fewer of the most recent groups are pending": group 1 lands
  record(0);               // [4, 8): landed
  record(1);               // [8, 12): group 2 still pending
  emu::cp_async(slot + 8, mine, 16, 0);       // src-size 0: 16 zero bytes
  emu::cp_async(slot + 12, mine + 4, 16, 4);  // src-size 4: one word, then zeros
  emu::cp_async_commit();  // group 3: slots 2, 3
  record(2);               // [12, 16): pending
  emu::cp_async_wait(0);   // everything lands
  record(1);               // [16, 20)
  record(2);               // [20, 24)
  record(3);               // [24, 28)
  emu::cp_async(slot + 0, mine + 4, 16, 16);  // not committed
  record(0);                                  // [28, 32): pending
  emu::cp_async_wait_all();                   // = commit_group; wait_group 0
  record(0);                                  // [32, 36)
}

/// Groups are per thread: even threads wait, odd ones not yet; after a barrier, an even thread
/// reads its own slot (landed) and its odd neighbour's (not waited for by its issuer).
__global__ void cp_async_per_thread_kernel(const unsigned* src, unsigned* out) {
  __shared__ __align__(16) unsigned stage[32 * 4];
  const int t = static_cast<int>(threadIdx.x);
  emu::cp_async(&stage[t * 4], src + t * 4, 16, 16);
  emu::cp_async_commit();
  if (t % 2 == 0) emu::cp_async_wait(0);
  __syncthreads();
  if (t % 2 == 0) {
    out[t] = stage[t * 4];
    out[t + 1] = stage[(t + 1) * 4];
  }
  __syncthreads();
  if (t % 2 == 1) emu::cp_async_wait(0);
  __syncthreads();
  out[32 + t] = stage[t * 4];
}

/// A cp.async of @p size bytes to a shared destination @p dst_offset bytes past a 16-byte boundary.
__global__ void cp_async_misaligned_kernel(const unsigned* src, int dst_offset, int size) {
  __shared__ __align__(16) unsigned char stage[64];
  if (threadIdx.x == 0) {
    emu::cp_async(stage + dst_offset, src, size, size);
    emu::cp_async_wait_all();
  }
}

/// D = A · B + C for 16 × 16 tiles through nvcuda::wmma, A and B row-major.
///   mode 0: load / mma / store only;
///   mode 1: also doubles every element of the A fragment (element-wise: layout-independent);
///   mode 2: fills the A fragment by hand, assuming lane l element e is A[l / 2][8 (l % 2) + e].
__global__ void wmma_kernel(const __half* A, const __half* B, const float* C, float* D, unsigned lda, unsigned ldb, unsigned ldc,
                            unsigned ldd, int mode) {
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c, d;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (mode == 2) {
    for (int e = 0; e < a.num_elements; ++e) a.x[e] = A[(lane / 2) * lda + 8 * (lane % 2) + e];
  } else {
    wmma::load_matrix_sync(a, A, lda);
  }
  if (mode == 1) {
    for (int e = 0; e < a.num_elements; ++e) a.x[e] = __float2half(2.0f * __half2float(a.x[e]));
  }
  wmma::load_matrix_sync(b, B, ldb);
  wmma::load_matrix_sync(c, C, ldc, wmma::mem_row_major);
  wmma::mma_sync(d, a, b, c);
  wmma::store_matrix_sync(D, d, ldd, wmma::mem_row_major);
}

/// The same with B column-major (B[n * ldb + k]), a zero accumulator, D stored column-major.
__global__ void wmma_col_kernel(const __half* A, const __half* B_col, float* D_col, unsigned ld) {
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> d;
  wmma::fill_fragment(d, 0.0f);
  wmma::load_matrix_sync(a, A, ld);
  wmma::load_matrix_sync(b, B_col, ld);
  wmma::mma_sync(d, a, b, d);
  wmma::store_matrix_sync(D_col, d, ld, wmma::mem_col_major);
}

}  // namespace emu_tensor_test

using namespace emu_tensor_test;

namespace {

std::string launch_error(const std::function<void()>& launch) {
  try {
    launch();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

template <class T>
T* to_device(const std::vector<T>& v) {
  T* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, v.size() * sizeof(T)));
  CUDA_CHECK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

template <class T>
std::vector<T> to_host(const T* p, std::size_t n) {
  std::vector<T> v(n);
  CUDA_CHECK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

/// 256 distinct small integers in [-128, 127] (a permutation), as halves: every product of two is
/// exact, and so is every fp32 sum of 16 of them plus a small integer, in any order.
std::vector<__half> distinct_halves(int count, int multiplier, int offset) {
  std::vector<__half> v(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) v[static_cast<std::size_t>(i)] = __float2half(static_cast<float>((i * multiplier + offset) % 256 - 128));
  return v;
}

/// D = A (m × k, lda) · B (k × n, ldb) + C (m × n, ldc), on the host in double (exact here).
std::vector<float> host_matmul(const std::vector<__half>& A, int lda, const std::vector<__half>& B, int ldb, const std::vector<float>& C,
                               int ldc, int m, int n, int k) {
  std::vector<float> D(static_cast<std::size_t>(m * n));
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = C.empty() ? 0.0 : C[static_cast<std::size_t>(i * ldc + j)];
      for (int kk = 0; kk < k; ++kk) {
        sum += static_cast<double>(__half2float(A[static_cast<std::size_t>(i * lda + kk)])) *
               static_cast<double>(__half2float(B[static_cast<std::size_t>(kk * ldb + j)]));
      }
      D[static_cast<std::size_t>(i * n + j)] = static_cast<float>(sum);
    }
  }
  return D;
}

float as_float(unsigned bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace

TEST_CASE("__half to float gives every one of the 65536 halves bit for bit as the compiler's _Float16 does", "[cpu]") {
  int wrong = 0;
  for (unsigned bits = 0; bits <= 0xFFFFu; ++bits) {
    const unsigned short h = static_cast<unsigned short>(bits);
    _Float16 f16;
    std::memcpy(&f16, &h, 2);
    const float want = static_cast<float>(f16), got = __half2float(__ushort_as_half(h));
    std::uint32_t want_bits = 0, got_bits = 0;
    std::memcpy(&want_bits, &want, 4);
    std::memcpy(&got_bits, &got, 4);
    if (want_bits != got_bits && ++wrong <= 5) FAIL_CHECK("half 0x" << std::hex << bits << ": 0x" << got_bits << ", the cast gives 0x" << want_bits);
  }
  CHECK(wrong == 0);
}

TEST_CASE("the PTX fragment tables written here cover each matrix element exactly once", "[cpu]") {
  // A sanity check of the transcription itself: each table is a bijection lanes × elements → tile.
  std::vector<int> a(256, 0), b(128, 0), c(128, 0);
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) ++a[static_cast<std::size_t>(ptx_doc::a_row(lane, i) * 16 + ptx_doc::a_col(lane, i))];
    for (int i = 0; i < 4; ++i) ++b[static_cast<std::size_t>(ptx_doc::b_row(lane, i) * 8 + ptx_doc::b_col(lane, i))];
    for (int i = 0; i < 4; ++i) ++c[static_cast<std::size_t>(ptx_doc::c_row(lane, i) * 8 + ptx_doc::c_col(lane, i))];
  }
  for (int v : a) CHECK(v == 1);
  for (int v : b) CHECK(v == 1);
  for (int v : c) CHECK(v == 1);
  // Spot values from the PTX figures: lane 0 holds A(0,0), A(0,1), A(8,0), A(8,1), A(0,8), A(0,9),
  // A(8,8), A(8,9); lane 5 (group 1, thread 1) holds B(2,1), B(3,1), B(10,1), B(11,1).
  CHECK(ptx_doc::a_row(0, 2) == 8);
  CHECK(ptx_doc::a_col(0, 4) == 8);
  CHECK(ptx_doc::b_row(5, 2) == 10);
  CHECK(ptx_doc::b_col(5, 2) == 1);
  CHECK(ptx_doc::c_row(5, 3) == 9);
  CHECK(ptx_doc::c_col(5, 3) == 3);
}

TEST_CASE("mma m16n8k16 follows the PTX ISA fragment tables for A B C and D in each warp", "[cpu]") {
  // Two warps, each with its own A, B, C: a layout slip or a mix-up between warps shows.
  std::vector<__half> A = distinct_halves(256, 37, 11), B = distinct_halves(128, 29, 5);  // warp 0
  const std::vector<__half> A1 = distinct_halves(256, 75, 3), B1 = distinct_halves(128, 83, 100);  // warp 1
  A.insert(A.end(), A1.begin(), A1.end());  // 2 × (16 × 16)
  B.insert(B.end(), B1.begin(), B1.end());  // 2 × (16 × 8)
  std::vector<float> C(256);
  for (int i = 0; i < 256; ++i) C[static_cast<std::size_t>(i)] = static_cast<float>((i * 13) % 41 - 20);
  __half* dA = to_device(A);
  __half* dB = to_device(B);
  float* dC = to_device(C);
  float* dD = to_device(std::vector<float>(256, -99999.0f));

  CHECK(launch_error([&] { mma_kernel<<<1, 64>>>(dA, dB, dC, dD, false); }).empty());
  const std::vector<float> D = to_host(dD, 256);
  for (int w = 0; w < 2; ++w) {
    const std::vector<__half> Aw(A.begin() + w * 256, A.begin() + (w + 1) * 256), Bw(B.begin() + w * 128, B.begin() + (w + 1) * 128);
    const std::vector<float> Cw(C.begin() + w * 128, C.begin() + (w + 1) * 128);
    const std::vector<float> want = host_matmul(Aw, 16, Bw, 8, Cw, 8, 16, 8, 16);
    int wrong = 0;
    for (int i = 0; i < 128; ++i) {
      if (D[static_cast<std::size_t>(w * 128 + i)] != want[static_cast<std::size_t>(i)]) {
        if (++wrong <= 5) UNSCOPED_INFO("warp " << w << " D(" << i / 8 << ", " << i % 8 << ") = " << D[static_cast<std::size_t>(w * 128 + i)] << ", want " << want[static_cast<std::size_t>(i)]);
      }
    }
    CHECK(wrong == 0);
  }

  SECTION("a[1] and a[2] exchanged give a wrong product") {
    CUDA_CHECK(cudaMemset(dD, 0, 256 * sizeof(float)));
    CHECK(launch_error([&] { mma_kernel<<<1, 64>>>(dA, dB, dC, dD, true); }).empty());
    const std::vector<float> bad = to_host(dD, 256);
    const std::vector<__half> A0(A.begin(), A.begin() + 256), B0(B.begin(), B.begin() + 128);
    const std::vector<float> C0(C.begin(), C.begin() + 128);
    const std::vector<float> want = host_matmul(A0, 16, B0, 8, C0, 8, 16, 8, 16);
    int wrong = 0;
    for (int i = 0; i < 128; ++i) wrong += bad[static_cast<std::size_t>(i)] != want[static_cast<std::size_t>(i)];
    CHECK(wrong > 64);  // every row of D sees swapped A elements: nearly all differ
  }
  cudaFree(dA);
  cudaFree(dB);
  cudaFree(dC);
  cudaFree(dD);
}

TEST_CASE("ldmatrix x4 and x4 trans give each lane the registers the PTX ISA layout describes", "[cpu]") {
  // Distinct half values (k / 2 - 64: all exact in fp16), compared bit for bit.
  std::vector<__half> tile(256);
  for (int k = 0; k < 256; ++k) tile[static_cast<std::size_t>(k)] = __float2half(static_cast<float>(k) * 0.5f - 64.0f);
  __half* d_tile = to_device(tile);
  std::uint32_t* d_out = to_device(std::vector<std::uint32_t>(128, 0));

  // Two ways of giving the 32 row addresses: mma's A order (lane l: row l % 16, column 8 (l / 16));
  // and a scrambled one (matrix j takes quadrant 3 - j, its rows in order 0, 3, 6, 1, 4, 7, 2, 5):
  // rows need not be contiguous, and matrix j is whatever lanes 8j … 8j+7 point at.
  std::vector<int> rows_a(32), cols_a(32), rows_s(32), cols_s(32);
  for (int l = 0; l < 32; ++l) {
    rows_a[static_cast<std::size_t>(l)] = l % 16;
    cols_a[static_cast<std::size_t>(l)] = 8 * (l / 16);
    const int j = l / 8, i = l % 8, quadrant = 3 - j;
    rows_s[static_cast<std::size_t>(l)] = 8 * (quadrant % 2) + (i * 3) % 8;
    cols_s[static_cast<std::size_t>(l)] = 8 * (quadrant / 2);
  }
  for (int addressing = 0; addressing < 2; ++addressing) {
    const std::vector<int>& rows = addressing == 0 ? rows_a : rows_s;
    const std::vector<int>& cols = addressing == 0 ? cols_a : cols_s;
    int* d_rows = to_device(rows);
    int* d_cols = to_device(cols);
    for (const bool trans : {false, true}) {
      CUDA_CHECK(cudaMemset(d_out, 0, 128 * sizeof(std::uint32_t)));
      CHECK(launch_error([&] { ldmatrix_kernel<<<1, 32>>>(d_tile, d_rows, d_cols, trans, d_out); }).empty());
      const std::vector<std::uint32_t> got = to_host(d_out, 128);
      int wrong = 0;
      for (int lane = 0; lane < 32; ++lane) {
        for (int j = 0; j < 4; ++j) {
          // Element (r, c) of matrix j: column c of the row whose address lane 8j + r gave.
          auto element = [&](int r, int c) {
            const int giver = 8 * j + r;
            return tile[static_cast<std::size_t>(rows[static_cast<std::size_t>(giver)] * 16 + cols[static_cast<std::size_t>(giver)] + c)];
          };
          const std::uint32_t want = pack_halves(element(ptx_doc::ldmatrix_row(lane, 0, trans), ptx_doc::ldmatrix_col(lane, 0, trans)),
                                                 element(ptx_doc::ldmatrix_row(lane, 1, trans), ptx_doc::ldmatrix_col(lane, 1, trans)));
          if (got[static_cast<std::size_t>(lane * 4 + j)] != want && ++wrong <= 5) {
            UNSCOPED_INFO("addressing " << addressing << (trans ? " trans" : "") << ": lane " << lane << " r[" << j << "] = 0x" << std::hex
                                        << got[static_cast<std::size_t>(lane * 4 + j)] << ", want 0x" << want << std::dec);
          }
        }
      }
      CHECK(wrong == 0);
    }
    cudaFree(d_rows);
    cudaFree(d_cols);
  }

  SECTION("a row address that is not 16-byte aligned is reported") {
    std::vector<int> cols = cols_a;
    cols[5] = 1;  // lane 5: &tile[5][1], 2 bytes past a 16-byte boundary
    int* d_rows = to_device(rows_a);
    int* d_cols = to_device(cols);
    const std::string error = launch_error([&] { ldmatrix_kernel<<<1, 32>>>(d_tile, d_rows, d_cols, false, d_out); });
    CHECK(error.find("ldmatrix") != std::string::npos);
    CHECK(error.find("lane 5") != std::string::npos);
    CHECK(error.find("16-byte aligned") != std::string::npos);
    cols[5] = 0;
    cols[9] = 4;  // lane 9: 8 bytes past a boundary, with .trans
    CUDA_CHECK(cudaMemcpy(d_cols, cols.data(), 32 * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(launch_error([&] { ldmatrix_kernel<<<1, 32>>>(d_tile, d_rows, d_cols, true, d_out); }).find("lane 9") != std::string::npos);
    cudaFree(d_rows);
    cudaFree(d_cols);
  }
  cudaFree(d_tile);
  cudaFree(d_out);
}

TEST_CASE("ldmatrix x4 and x4 trans from shared tiles feed mma the fragments it expects", "[cpu]") {
  const std::vector<__half> A = distinct_halves(256, 37, 11), B = distinct_halves(256, 53, 7);
  __half* dA = to_device(A);
  __half* dB = to_device(B);
  float* dD = to_device(std::vector<float>(256, -99999.0f));
  CHECK(launch_error([&] { ldmatrix_mma_kernel<<<1, 32>>>(dA, dB, dD); }).empty());
  const std::vector<float> got = to_host(dD, 256), want = host_matmul(A, 16, B, 16, {}, 0, 16, 16, 16);
  int wrong = 0;
  for (int i = 0; i < 256; ++i) wrong += got[static_cast<std::size_t>(i)] != want[static_cast<std::size_t>(i)];
  CHECK(wrong == 0);
  cudaFree(dA);
  cudaFree(dB);
  cudaFree(dD);
}

TEST_CASE("mma and ldmatrix are warp-wide: a lane that has exited or does not exist is an error", "[cpu]") {
  float* out = to_device(std::vector<float>(64, 0.0f));
  std::uint32_t* out_u = to_device(std::vector<std::uint32_t>(64, 0));
  CHECK(launch_error([&] { mma_early_exit_kernel<<<1, 32>>>(out, -1); }).empty());
  CHECK(to_host(out, 1)[0] == 1.0f);  // A · B = 0, C = 1
  const std::string quit31 = launch_error([&] { mma_early_exit_kernel<<<1, 32>>>(out, 31); });
  CHECK(quit31.find("mma.sync.m16n8k16 is warp-wide") != std::string::npos);
  CHECK(quit31.find("have exited") != std::string::npos);
  // Lane 0 of the second warp (thread 32) exits: that warp's mma is the error.
  const std::string quit32 = launch_error([&] { mma_early_exit_kernel<<<1, 64>>>(out, 32); });
  CHECK(quit32.find("all 32 lanes of warp 1") != std::string::npos);
  // A block of 48 threads: the second warp has only 16 lanes.
  CHECK(launch_error([&] { mma_early_exit_kernel<<<1, 48>>>(out, -1); }).find("not a multiple of 32") != std::string::npos);
  CHECK(launch_error([&] { ldmatrix_early_exit_kernel<<<1, 32>>>(out_u, -1); }).empty());
  CHECK(launch_error([&] { ldmatrix_early_exit_kernel<<<1, 32>>>(out_u, 31); }).find("ldmatrix is warp-wide") != std::string::npos);
  cudaFree(out);
  cudaFree(out_u);
}

TEST_CASE("cp.async lands a group only when its thread waits for it and zero-fills past src-size", "[cpu]") {
  std::vector<unsigned> src(32 * 8);
  for (int i = 0; i < 32 * 8; ++i) src[static_cast<std::size_t>(i)] = 0x3F800000u + static_cast<unsigned>(i);  // floats near 1
  unsigned* d_src = to_device(src);
  unsigned* d_out = to_device(std::vector<unsigned>(32 * kObservations, 0));
  CHECK(launch_error([&] { cp_async_kernel<<<1, 32>>>(d_src, d_out); }).empty());
  const std::vector<unsigned> o = to_host(d_out, 32 * kObservations);
  for (int t = 0; t < 32; ++t) {
    INFO("thread " << t);
    const unsigned* obs = &o[static_cast<std::size_t>(t * kObservations)];
    const unsigned* mine = &src[static_cast<std::size_t>(t * 8)];
    for (int k = 0; k < 4; ++k) {
      CHECK(obs[0 + k] == 0xFFFFFFFFu);       // issued, committed, not waited for: NaN
      CHECK(obs[4 + k] == mine[k]);           // wait_group 1 landed group 1 ...
      CHECK(obs[8 + k] == 0xFFFFFFFFu);       // ... and not group 2
      CHECK(obs[12 + k] == 0xFFFFFFFFu);      // group 3 pending
      CHECK(obs[16 + k] == mine[4 + k]);      // wait_group 0: group 2 ...
      CHECK(obs[20 + k] == 0u);               // ... src-size 0: zeros
      CHECK(obs[24 + k] == (k == 0 ? mine[4] : 0u));  // src-size 4: one word, then zeros
      CHECK(obs[28 + k] == 0xFFFFFFFFu);      // issued, not committed
      CHECK(obs[32 + k] == mine[4 + k]);      // wait_all commits and waits
    }
    CHECK(std::isnan(as_float(obs[0])));
    CHECK(__hisnan(__ushort_as_half(static_cast<unsigned short>(obs[0] & 0xFFFFu))));
  }
  cudaFree(d_src);
  cudaFree(d_out);
}

TEST_CASE("cp.async groups belong to the issuing thread and its addresses must be aligned to the copy size", "[cpu]") {
  std::vector<unsigned> src(32 * 4);
  for (int i = 0; i < 32 * 4; ++i) src[static_cast<std::size_t>(i)] = 1000u + static_cast<unsigned>(i);
  unsigned* d_src = to_device(src);
  unsigned* d_out = to_device(std::vector<unsigned>(64, 0));
  CHECK(launch_error([&] { cp_async_per_thread_kernel<<<1, 32>>>(d_src, d_out); }).empty());
  const std::vector<unsigned> o = to_host(d_out, 64);
  for (int t = 0; t < 32; t += 2) {
    CHECK(o[static_cast<std::size_t>(t)] == src[static_cast<std::size_t>(t * 4)]);   // its own group, waited for
    CHECK(o[static_cast<std::size_t>(t + 1)] == 0xFFFFFFFFu);                         // its neighbour's: not yet
  }
  for (int t = 0; t < 32; ++t) CHECK(o[static_cast<std::size_t>(32 + t)] == src[static_cast<std::size_t>(t * 4)]);
  CHECK(launch_error([&] { cp_async_misaligned_kernel<<<1, 32>>>(d_src, 0, 16); }).empty());
  CHECK(launch_error([&] { cp_async_misaligned_kernel<<<1, 32>>>(d_src, 8, 8); }).empty());
  CHECK(launch_error([&] { cp_async_misaligned_kernel<<<1, 32>>>(d_src, 8, 16); }).find("16-byte aligned") != std::string::npos);
  CHECK(launch_error([&] { cp_async_misaligned_kernel<<<1, 32>>>(d_src, 2, 4); }).find("4-byte aligned") != std::string::npos);
  CHECK(launch_error([&] { cp_async_misaligned_kernel<<<1, 32>>>(d_src, 0, 12); }).find("size must be 4, 8 or 16") != std::string::npos);
  cudaFree(d_src);
  cudaFree(d_out);
}

TEST_CASE("wmma computes the product through its opaque fragments and code that assumes their layout does not", "[cpu]") {
  // A 16 × 16 (ld 24, padded), B 16 × 16 (ld 16), C 16 × 16 (ld 20), D (ld 16): exact integers.
  const int lda = 24, ldb = 16, ldc = 20, ldd = 16;
  std::vector<__half> A(16 * lda, __float2half(0.0f)), B = distinct_halves(256, 53, 7);
  const std::vector<__half> Avals = distinct_halves(256, 37, 11);
  for (int i = 0; i < 16; ++i) {
    for (int k = 0; k < 16; ++k) A[static_cast<std::size_t>(i * lda + k)] = Avals[static_cast<std::size_t>(i * 16 + k)];
  }
  std::vector<float> C(16 * ldc, 0.0f);
  for (int i = 0; i < 16 * ldc; ++i) C[static_cast<std::size_t>(i)] = static_cast<float>((i * 7) % 31 - 15);
  __half* dA = to_device(A);
  __half* dB = to_device(B);
  float* dC = to_device(C);
  float* dD = to_device(std::vector<float>(256, -99999.0f));
  const std::vector<float> want = host_matmul(A, lda, B, ldb, C, ldc, 16, 16, 16);
  auto mismatches = [&](const std::vector<float>& got, const std::vector<float>& expect) {
    int wrong = 0;
    for (int i = 0; i < 256; ++i) wrong += got[static_cast<std::size_t>(i)] != expect[static_cast<std::size_t>(i)];
    return wrong;
  };

  CHECK(launch_error([&] { wmma_kernel<<<1, 32>>>(dA, dB, dC, dD, lda, ldb, ldc, ldd, 0); }).empty());
  CHECK(mismatches(to_host(dD, 256), want) == 0);

  // Element-wise code that treats every x[i] alike is layout-independent: 2A · B + C.
  std::vector<__half> A2(A);
  for (__half& h : A2) h = __float2half(2.0f * __half2float(h));
  CHECK(launch_error([&] { wmma_kernel<<<1, 32>>>(dA, dB, dC, dD, lda, ldb, ldc, ldd, 1); }).empty());
  CHECK(mismatches(to_host(dD, 256), host_matmul(A2, lda, B, ldb, C, ldc, 16, 16, 16)) == 0);

  // Writing x[i] as if lane l held row l / 2, columns 8 (l % 2) … + 7: a wrong product.
  CHECK(launch_error([&] { wmma_kernel<<<1, 32>>>(dA, dB, dC, dD, lda, ldb, ldc, ldd, 2); }).empty());
  const int wrong = mismatches(to_host(dD, 256), want);
  INFO(wrong << " of 256 elements differ");
  CHECK(wrong > 128);

  // Column-major B and D.
  std::vector<__half> B_col(256);
  for (int k = 0; k < 16; ++k) {
    for (int n = 0; n < 16; ++n) B_col[static_cast<std::size_t>(n * 16 + k)] = B[static_cast<std::size_t>(k * 16 + n)];
  }
  std::vector<__half> A16(Avals);
  __half* dA16 = to_device(A16);
  __half* dBc = to_device(B_col);
  CHECK(launch_error([&] { wmma_col_kernel<<<1, 32>>>(dA16, dBc, dD, 16); }).empty());
  const std::vector<float> got_col = to_host(dD, 256);
  const std::vector<float> want0 = host_matmul(A16, 16, B, 16, {}, 0, 16, 16, 16);
  int wrong_col = 0;
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) wrong_col += got_col[static_cast<std::size_t>(j * 16 + i)] != want0[static_cast<std::size_t>(i * 16 + j)];
  }
  CHECK(wrong_col == 0);
  cudaFree(dA16);
  cudaFree(dBc);

  SECTION("ldm not a multiple of 8 halves or 4 floats and a pointer not 32-byte aligned are reported") {
    CHECK(launch_error([&] { wmma_kernel<<<1, 32>>>(dA, dB, dC, dD, 12, ldb, ldc, ldd, 0); }).find("ldm 12 must be a multiple of 8") !=
          std::string::npos);
    CHECK(launch_error([&] { wmma_kernel<<<1, 32>>>(dA, dB, dC, dD, lda, 20, ldc, ldd, 0); }).find("ldm 20 must be a multiple of 8") !=
          std::string::npos);
    CHECK(launch_error([&] { wmma_kernel<<<1, 32>>>(dA, dB, dC, dD, lda, ldb, 18, ldd, 0); }).find("ldm 18 must be a multiple of 4") !=
          std::string::npos);
    CHECK(launch_error([&] { wmma_kernel<<<1, 32>>>(dA, dB, dC, dD, lda, ldb, ldc, 6, 0); }).find("store_matrix_sync") !=
          std::string::npos);
    // A pointer 16 bytes past a 32-byte boundary (ldm fine).
    CHECK(launch_error([&] { wmma_kernel<<<1, 32>>>(dA + 8, dB, dC, dD, lda, ldb, ldc, ldd, 0); }).find("32-byte aligned") !=
          std::string::npos);
  }
  cudaFree(dA);
  cudaFree(dB);
  cudaFree(dC);
  cudaFree(dD);
}
