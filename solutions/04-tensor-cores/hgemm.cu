/// @file hgemm.cu
/// @brief Lab 04: the HGEMM ladder (fp16 in, fp32 accumulate and out) on tensor cores, against
/// cuBLAS's cublasGemmEx (hgemm.hpp).
///
///   v1 (given)  WMMA, one warp per 16 × 16 tile of C, fragments straight from global memory
///   v2          WMMA on 128 × 128 × 32 block tiles staged in shared memory: 8 warps, 64 × 32 each
///   v3          mma.sync.m16n8k16 fed by ldmatrix from shared memory (sm_80+)
///   v4          v3 with a 3-stage cp.async pipeline: tile k + 2 is in flight while k is multiplied
///
/// Every kernel sees padded operands (the launcher's job, below): A is Mp × Kp, B is Kp × Np, all
/// multiples of 16, zero past M, N, K, 32-byte aligned. A block tile may still hang over the
/// edge: rows past Mp, columns past Np and the k steps past Kp are loaded as zeros, and only C's
/// M × N elements are stored.
#include <mma.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include "gpulab/check.hpp"
#include "gpulab/device_buffer.hpp"
#include "hgemm.hpp"
#include "tensor_core.cuh"

namespace lab04 {
namespace {

using namespace nvcuda;

/// What every kernel gets (see the file comment).
struct Operands {
  const __half* A;  ///< Mp × Kp, row stride Kp
  const __half* B;  ///< Kp × Np, row stride Np
  float* C;         ///< M × N, row stride N
  int M, N;         ///< C's size
  int Mp, Np, Kp;   ///< the operands' sizes, multiples of 16
  bool pairs;       ///< C's rows allow 8-byte stores of two floats (N even, C 8-byte aligned)
};

// ---------------------------------------------------------------------------------------------
// Shared by the rungs (given)
// ---------------------------------------------------------------------------------------------

/// Writes a warp's 16 × 16 accumulator tile at (row0, col0) of C, only the elements inside M × N:
/// through @p scratch (256 floats of this warp's shared memory, 32-byte aligned), since
/// store_matrix_sync needs a row stride that is a multiple of 4 and an aligned pointer, which C
/// (any N, any offset) does not promise.
__device__ __forceinline__ void store_wmma_tile(const wmma::fragment<wmma::accumulator, 16, 16, 16, float>& acc, float* scratch, const Operands& o, int row0,
                                int col0) {
  wmma::store_matrix_sync(scratch, acc, 16, wmma::mem_row_major);
  __syncwarp();
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int i = lane; i < 256; i += 32) {
    const int row = row0 + i / 16, col = col0 + i % 16;
    if (row < o.M && col < o.N) o.C[static_cast<std::size_t>(row) * o.N + col] = scratch[i];
  }
  __syncwarp();  // the scratch is reused by the warp's next tile
}

/// Block tiles of v2–v4: 128 × 128 of C, 32 of K per step; 8 warps in a 2 × 4 grid, each owning
/// 64 × 32 of C. Shared tiles are padded by 8 halves (16 bytes) per row, which keeps every row
/// 16-byte aligned and, TODO(04.8) asks you to show, spares v3's ldmatrix its bank conflicts.
constexpr int kBM = 128, kBN = 128, kBK = 32, kThreads = 256;
constexpr int kLdA = kBK + 8;  ///< As[128][40]
constexpr int kLdB = kBN + 8;  ///< Bs[32][136]
constexpr int kTileAHalves = kBM * kLdA, kTileBHalves = kBK * kLdB;

/// The padded A tile: the 16-byte chunk that starts at (row, col) begins at half row · kLdA + col.
/// A tile's layout is a type with this at(), so that the copies (load_tiles_sync) serve others too.
struct PaddedA {
  __host__ __device__ static constexpr int at(int row, int col) { return row * kLdA + col; }
  /// at(row + rows, col + kk) from base = at(row, col), for rows and kk multiples of 16 (col
  /// below 16 when kk is not 0).
  __host__ __device__ static constexpr int moved(int base, int rows, int kk) { return base + rows * kLdA + kk; }
};

/// The swizzled A tile (the reference's v3 and v4; yours too, if you like): rows of 32 halves,
/// two to a 128-byte line, the 16-byte chunk c of line L (c = 0–7 across its two rows) at place
/// c ^ (L % 8) of the line. (CuTe calls it Swizzle<3,3,3>; TMA's 128-byte swizzle is the same
/// idea.) Why it beats padding is a question of lesson 04's, TODO(04.9).
struct SwizzledA {
  __host__ __device__ static constexpr int at(int row, int col) {
    const int line = row / 2, chunk = (row % 2) * (kBK / 8) + col / 8;
    return line * 64 + (chunk ^ (line % 8)) * 8 + col % 8;
  }
  /// at(row + rows, col + kk) from base = at(row, col), for rows and kk multiples of 16 (col
  /// below 16 when kk is not 0): 16 rows on is 8 lines on (the same XOR), and 16 columns on flips
  /// bit 1 of a chunk whose bit 1 was clear, which commutes with the XOR. So each lane computes
  /// the swizzle once; the other rows and k steps are an xor and a constant.
  __host__ __device__ static constexpr int moved(int base, int rows, int kk) { return (base ^ kk) + rows * kBK; }
};
constexpr int kSwizzledAHalves = kBM * kBK;

/// How the 256 threads cover a tile in 16-byte chunks (8 halves): thread t takes chunk t of each
/// pass, consecutive threads on consecutive chunks of a row (coalesced); each pass covers
/// kThreads / chunks-per-row rows, and a tile takes a fixed number of passes (2 for A, 2 for B),
/// so the loops unroll and each thread's row, column and base address are computed once.
constexpr int kChunksA = kBK / 8, kChunksB = kBN / 8;                      ///< chunks per row: 4, 16
constexpr int kRowsPerPassA = kThreads / kChunksA, kRowsPerPassB = kThreads / kChunksB;  ///< 64, 16
constexpr int kPassesA = kBM / kRowsPerPassA, kPassesB = kBK / kRowsPerPassB;            ///< 2, 2
static_assert(kPassesA * kRowsPerPassA == kBM && kPassesB * kRowsPerPassB == kBK, "the passes cover the tiles");

/// This thread's chunks of the A tile (rows m0 …, k0 …) and the B tile (k0 …, n0 …), in the layout
/// above: pass i of A is row ra + i·kRowsPerPassA at column ca, read from a + i·kRowsPerPassA·Kp
/// (B likewise), inside the operands when a_cols and the row is below Mp.
struct TileChunks {
  int ra, ca, rb, cb;
  bool a_cols, b_cols;
  const __half* a;
  const __half* b;
  __device__ __forceinline__ TileChunks(const Operands& o, int m0, int n0, int k0) {
    const int tid = static_cast<int>(threadIdx.x);
    ra = tid / kChunksA;
    ca = (tid % kChunksA) * 8;
    rb = tid / kChunksB;
    cb = (tid % kChunksB) * 8;
    a_cols = k0 + ca < o.Kp;
    b_cols = n0 + cb < o.Np;
    a = o.A + static_cast<std::size_t>(m0 + ra) * o.Kp + k0 + ca;
    b = o.B + static_cast<std::size_t>(k0 + rb) * o.Np + n0 + cb;
  }
};

/// Copies the A tile (laid out as ALayout says) and the B tile into shared memory with 16-byte
/// loads, zeros past the operands' edges.
template <class ALayout = PaddedA>
__device__ __forceinline__ void load_tiles_sync(const Operands& o, __half* As, __half* Bs, int m0, int n0, int k0) {
  const TileChunks t(o, m0, n0, k0);
  const int a_chunk = ALayout::at(t.ra, t.ca);
#pragma unroll
  for (int i = 0; i < kPassesA; ++i) {
    const int row = t.ra + i * kRowsPerPassA;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (t.a_cols && m0 + row < o.Mp) v = *reinterpret_cast<const uint4*>(t.a + static_cast<std::size_t>(i) * kRowsPerPassA * o.Kp);
    *reinterpret_cast<uint4*>(As + ALayout::moved(a_chunk, i * kRowsPerPassA, 0)) = v;
  }
#pragma unroll
  for (int i = 0; i < kPassesB; ++i) {
    const int row = t.rb + i * kRowsPerPassB;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (t.b_cols && k0 + row < o.Kp) v = *reinterpret_cast<const uint4*>(t.b + static_cast<std::size_t>(i) * kRowsPerPassB * o.Np);
    *reinterpret_cast<uint4*>(Bs + row * kLdB + t.cb) = v;
  }
}

// ---------------------------------------------------------------------------------------------
// v1 (given): WMMA, one warp per 16 × 16 tile of C
// ---------------------------------------------------------------------------------------------

/// Each warp walks K in steps of 16: load a 16 × 16 fragment of A and of B from global memory,
/// one mma. Per mma (2·16³ = 8192 FLOP) the warp loads 2 × 512 bytes: 8 FLOP per byte from L2,
/// against an H200's ~700 TFLOP/s / ~6–8 TB/s of L2 (an estimate) ≈ 100 FLOP/B needed — so v1 waits on memory.
__global__ void hgemm_v1_wmma_naive(Operands o) {
  __shared__ __align__(32) float scratch[4][256];  // 4 warps per block
  const int warp_in_block = static_cast<int>(threadIdx.x / 32);
  const long long warp = static_cast<long long>(blockIdx.x) * 4 + warp_in_block;
  const int tiles_n = o.Np / 16;
  if (warp >= static_cast<long long>(o.Mp / 16) * tiles_n) return;  // the whole warp leaves together
  const int row0 = static_cast<int>(warp / tiles_n) * 16, col0 = static_cast<int>(warp % tiles_n) * 16;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k = 0; k < o.Kp; k += 16) {
    wmma::load_matrix_sync(a, o.A + static_cast<std::size_t>(row0) * o.Kp + k, o.Kp);
    wmma::load_matrix_sync(b, o.B + static_cast<std::size_t>(k) * o.Np + col0, o.Np);
    wmma::mma_sync(acc, a, b, acc);
  }
  store_wmma_tile(acc, scratch[warp_in_block], o, row0, col0);
}

// ---------------------------------------------------------------------------------------------
// v2: WMMA on shared-memory block tiles
// ---------------------------------------------------------------------------------------------

// BEGIN SOLUTION(04.7) v2: WMMA on 128 x 128 block tiles staged in shared memory
/// 8 warps share each 128 × 32 slab of A and 32 × 128 slab of B: every element loaded from global
/// memory now feeds 4 (A) or 2 (B) fragments of each of the warps that need it. Per block step:
/// 16 KB loaded, 2·128·128·32 = 1 MFLOP: 64 FLOP per byte, 8× v1's.
__global__ void __launch_bounds__(kThreads, 2) hgemm_v2_wmma_shared(Operands o) {
  __shared__ __align__(32) __half As[kTileAHalves];
  __shared__ __align__(32) __half Bs[kTileBHalves];
  __shared__ __align__(32) float scratch[kThreads / 32][256];
  const int warp = static_cast<int>(threadIdx.x / 32), wm = warp / 4, wn = warp % 4;  // 2 × 4 warps
  const int m0 = static_cast<int>(blockIdx.y) * kBM, n0 = static_cast<int>(blockIdx.x) * kBN;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
#pragma unroll
  for (auto& row : acc) {
    for (auto& f : row) wmma::fill_fragment(f, 0.0f);
  }
  for (int k0 = 0; k0 < o.Kp; k0 += kBK) {
    load_tiles_sync(o, As, Bs, m0, n0, k0);
    __syncthreads();  // the tiles are complete
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[4];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b[2];
#pragma unroll
      for (int i = 0; i < 4; ++i) wmma::load_matrix_sync(a[i], As + (wm * 64 + i * 16) * kLdA + kk, kLdA);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], Bs + kk * kLdB + wn * 32 + j * 16, kLdB);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
      }
    }
    __syncthreads();  // everyone is done with the tiles before the next step overwrites them
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) store_wmma_tile(acc[i][j], scratch[warp], o, m0 + wm * 64 + i * 16, n0 + wn * 32 + j * 16);
  }
}
// STUB: __global__ void hgemm_v2_wmma_shared(Operands) {}
// END SOLUTION

// ---------------------------------------------------------------------------------------------
// v3: mma.sync m16n8k16 fed by ldmatrix
// ---------------------------------------------------------------------------------------------

// BEGIN SOLUTION(04.9) v3: mma.sync m16n8k16 with ldmatrix from padded shared memory, and the fragment store
// The reference reads and writes A swizzled. Padding by 8 halves frees ldmatrix of conflicts but
// not the copies: a phase of 16-byte stores (8 threads, 128 bytes) writes rows r and r + 1, 4
// chunks each, and with 80-byte rows chunk 0 of row r and chunk 3 of row r + 1 are 128 bytes
// apart, on the same 4 banks: 2-way. Swizzled, a store phase fills one line, its 8 chunks on 8
// places; an ldmatrix phase (8 consecutive rows, one column) reads 4 lines at 4 different XORs,
// 2 chunks each on the two halves of a line: 8 places again. A's tile also shrinks by the 20 %
// that padding cost. B's 136-half rows are 17 chunks apart, an odd number: conflict-free both
// ways. Gain expected: shared-memory wavefronts per block k-step 576 → 512 (ldmatrix 384, B's
// copies 64, A's 128 → 64), about 11 %: a few per cent of v3 and v4 at most, to be measured.

/// The most of one phase's 8 chunks of 16 bytes that share 4 banks (1: conflict-free), over every
/// phase of the A tile's copies (TileChunks: 8 consecutive threads, 2 rows of 4 chunks) or, with
/// @p reads, of ldmatrix (8 consecutive rows at one chunk column), in layout L.
template <class L>
constexpr int a_tile_conflict_ways(bool reads) {
  int worst = 1;
  for (int phase = 0; phase < kBM * kChunksA / 8; ++phase) {
    int on_banks[8] = {};
    for (int k = 0; k < 8; ++k) {
      const int row = reads ? phase / kChunksA * 8 + k : (phase * 8 + k) / kChunksA;
      const int col = reads ? phase % kChunksA * 8 : (phase * 8 + k) % kChunksA * 8;
      const int ways = ++on_banks[L::at(row, col) / 8 % 8];
      worst = ways > worst ? ways : worst;
    }
  }
  return worst;
}
static_assert(a_tile_conflict_ways<PaddedA>(false) == 2 && a_tile_conflict_ways<PaddedA>(true) == 1, "padding: 2-way copies, ldmatrix free");
static_assert(a_tile_conflict_ways<SwizzledA>(false) == 1 && a_tile_conflict_ways<SwizzledA>(true) == 1, "the swizzle: both conflict-free");

/// Whether L places the tile's kBM × kBK / 8 chunks on as many distinct chunk places in
/// [0, kBM × kBK): a layout that maps two chunks to one place, or one past the tile, fails.
template <class L>
constexpr bool a_tile_is_a_permutation() {
  bool taken[kBM * kBK / 8] = {};
  for (int row = 0; row < kBM; ++row) {
    for (int col = 0; col < kBK; col += 8) {
      const int place = L::at(row, col);
      if (place < 0 || place >= kBM * kBK || place % 8 != 0 || taken[place / 8]) return false;
      taken[place / 8] = true;
    }
  }
  return true;
}
static_assert(a_tile_is_a_permutation<SwizzledA>(), "the swizzle puts every chunk of the tile in a place of its own");

/// Whether L::moved agrees with L::at for every thread's copies (TileChunks) and every lane's
/// ldmatrix rows in mma_warp_step.
template <class L>
constexpr bool moves_agree() {
  for (int tid = 0; tid < kThreads; ++tid) {
    const int row = tid / kChunksA, col = tid % kChunksA * 8;
    for (int i = 0; i < kPassesA; ++i) {
      if (L::moved(L::at(row, col), i * kRowsPerPassA, 0) != L::at(row + i * kRowsPerPassA, col)) return false;
    }
  }
  for (int wm = 0; wm < 2; ++wm) {
    for (int lane = 0; lane < 32; ++lane) {
      const int row = wm * 64 + lane % 16, col = (lane / 16) * 8;
      for (int i = 0; i < 4; ++i) {
        for (int kk = 0; kk < kBK; kk += 16) {
          if (L::moved(L::at(row, col), i * 16, kk) != L::at(row + i * 16, col + kk)) return false;
        }
      }
    }
  }
  return true;
}
static_assert(moves_agree<PaddedA>() && moves_agree<SwizzledA>(), "moved() is at() for the copies and the warp step");

/// One block step of a warp's 64 × 32 tile: for each 16 of the 32 k, four A fragments (16 × 16,
/// one ldmatrix.x4 each) and four B fragments (16 × 8; one ldmatrix.x4.trans gives two), then
/// 4 × 4 mma. Shared-memory bytes per m16n8k16: (4·512 + 4·256) / 16 = 192 — the same as v2's
/// (what WMMA's loads compile to: `cuobjdump -sass` says). What v3 gains is control: a documented fragment layout,
/// so results go from registers straight to C (no scratch round trip), and loads the next rung
/// can overlap with the multiply.
__device__ __forceinline__ void mma_warp_step(const __half* As, const __half* Bs, float acc[4][4][4], int wm, int wn) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int a_row = SwizzledA::at(wm * 64 + lane % 16, (lane / 16) * 8);  // this lane's row of A's first fragment
#pragma unroll
  for (int kk = 0; kk < kBK; kk += 16) {
    std::uint32_t a[4][4], b[4][2];
#pragma unroll
    for (int i = 0; i < 4; ++i) ldmatrix_x4(a[i], As + SwizzledA::moved(a_row, i * 16, kk));
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      std::uint32_t r[4];
      ldmatrix_x4_trans(r, Bs + (kk + lane % 16) * kLdB + wn * 32 + j * 16 + (lane / 16) * 8);
      b[2 * j][0] = r[0];  // k 0–7 of columns 0–7
      b[2 * j][1] = r[1];  // k 8–15 of columns 0–7
      b[2 * j + 1][0] = r[2];
      b[2 * j + 1][1] = r[3];
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) mma_m16n8k16(acc[i][j], a[i], b[j], acc[i][j]);
    }
  }
}

/// Stores a warp's 64 × 32 tile from the accumulator fragments: lane (g, t) holds rows g and g + 8,
/// columns 2t and 2t + 1 of each 16 × 8 piece — two neighbours, so one 8-byte store when C allows.
__device__ __forceinline__ void store_mma_tile(const Operands& o, const float acc[4][4][4], int row0, int col0) {
  const int lane = static_cast<int>(threadIdx.x % 32), g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int col = col0 + j * 8 + 2 * t;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + i * 16 + g + 8 * h;
        if (row >= o.M || col >= o.N) continue;
        float* c = o.C + static_cast<std::size_t>(row) * o.N + col;
        if (o.pairs && col + 1 < o.N) {
          *reinterpret_cast<float2*>(c) = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
        } else {
          c[0] = acc[i][j][2 * h];
          if (col + 1 < o.N) c[1] = acc[i][j][2 * h + 1];
        }
      }
    }
  }
}

__global__ void __launch_bounds__(kThreads, 2) hgemm_v3_mma_ldmatrix(Operands o) {
  __shared__ __align__(128) __half As[kSwizzledAHalves];
  __shared__ __align__(128) __half Bs[kTileBHalves];
  const int warp = static_cast<int>(threadIdx.x / 32), wm = warp / 4, wn = warp % 4;
  const int m0 = static_cast<int>(blockIdx.y) * kBM, n0 = static_cast<int>(blockIdx.x) * kBN;
  float acc[4][4][4] = {};
  for (int k0 = 0; k0 < o.Kp; k0 += kBK) {
    load_tiles_sync<SwizzledA>(o, As, Bs, m0, n0, k0);
    __syncthreads();
    mma_warp_step(As, Bs, acc, wm, wn);
    __syncthreads();
  }
  store_mma_tile(o, acc, m0 + wm * 64, n0 + wn * 32);
}
// STUB: __device__ void mma_warp_step(const __half*, const __half*, float[4][4][4], int, int) {}
// STUB: __device__ void store_mma_tile(const Operands&, const float[4][4][4], int, int) {}
// STUB: __global__ void hgemm_v3_mma_ldmatrix(Operands) {}
// END SOLUTION

// ---------------------------------------------------------------------------------------------
// v4: v3 with a cp.async pipeline
// ---------------------------------------------------------------------------------------------

/// Stages in flight; each holds an A and a B tile (18 944 bytes), so 3 stages need 56 832 bytes
/// of dynamic shared memory (more than the default 48 KB: the launcher raises the limit).
constexpr int kStages = 3;
constexpr std::size_t kStageBytes = (kTileAHalves + kTileBHalves) * sizeof(__half);

// BEGIN SOLUTION(04.10) v4: a 3-stage cp.async pipeline around v3's warp step
/// Issues the copies of k tile @p kt into stage buffers As, Bs: cp.async of 16 bytes per chunk,
/// zero-filled past the operands' edges (a valid source address is passed all the same).
__device__ __forceinline__ void issue_tiles_async(const Operands& o, __half* As, __half* Bs, int m0, int n0, int k0) {
  // The chunks of load_tiles_sync: unrolled, the addresses computed once per tile.
  const TileChunks t(o, m0, n0, k0);
  const int a_chunk = SwizzledA::at(t.ra, t.ca);
#pragma unroll
  for (int i = 0; i < kPassesA; ++i) {
    const int row = t.ra + i * kRowsPerPassA;
    const bool valid = t.a_cols && m0 + row < o.Mp;
    cp_async_16(As + SwizzledA::moved(a_chunk, i * kRowsPerPassA, 0), valid ? t.a + static_cast<std::size_t>(i) * kRowsPerPassA * o.Kp : o.A, valid);
  }
#pragma unroll
  for (int i = 0; i < kPassesB; ++i) {
    const int row = t.rb + i * kRowsPerPassB;
    const bool valid = t.b_cols && k0 + row < o.Kp;
    cp_async_16(Bs + row * kLdB + t.cb, valid ? t.b + static_cast<std::size_t>(i) * kRowsPerPassB * o.Np : o.B, valid);
  }
}

/// Tile kt is multiplied while tiles kt + 1 and kt + 2 are in flight: each step waits only for its
/// own group (all but the newest kStages − 2), and one barrier per step both publishes every
/// thread's landed copies and retires the stage that the step's new copies overwrite (the one
/// multiplied in the step before).
__global__ void __launch_bounds__(kThreads, 2) hgemm_v4_mma_pipelined(Operands o) {
  extern __shared__ __align__(128) unsigned char smem[];
  auto stage_a = [&](int s) { return reinterpret_cast<__half*>(smem + s * kStageBytes); };
  auto stage_b = [&](int s) { return reinterpret_cast<__half*>(smem + s * kStageBytes) + kTileAHalves; };
  const int warp = static_cast<int>(threadIdx.x / 32), wm = warp / 4, wn = warp % 4;
  const int m0 = static_cast<int>(blockIdx.y) * kBM, n0 = static_cast<int>(blockIdx.x) * kBN;
  const int tiles = (o.Kp + kBK - 1) / kBK;
  float acc[4][4][4] = {};
  for (int s = 0; s < kStages - 1; ++s) {  // prologue: the first kStages − 1 tiles in flight
    if (s < tiles) issue_tiles_async(o, stage_a(s), stage_b(s), m0, n0, s * kBK);
    cp_async_commit();  // a group per tile, empty or not, keeps the count of groups simple
  }
  for (int kt = 0; kt < tiles; ++kt) {
    cp_async_wait<kStages - 2>();  // tile kt has landed (for this thread's copies)
    __syncthreads();               // ... and for everyone's; stage (kt − 1) % kStages is free
    const int next = kt + kStages - 1;
    if (next < tiles) issue_tiles_async(o, stage_a(next % kStages), stage_b(next % kStages), m0, n0, next * kBK);
    cp_async_commit();
    mma_warp_step(stage_a(kt % kStages), stage_b(kt % kStages), acc, wm, wn);
  }
  store_mma_tile(o, acc, m0 + wm * 64, n0 + wn * 32);
}
// STUB: __global__ void hgemm_v4_mma_pipelined(Operands) {}
// END SOLUTION

// ---------------------------------------------------------------------------------------------
// The launcher (given): padding, support, launch
// ---------------------------------------------------------------------------------------------

/// dst (rows_p × cols_p) = src (rows × cols) with zeros around it.
__global__ void pad_matrix(const __half* src, int rows, int cols, __half* dst, int rows_p, int cols_p) {
  const long long total = static_cast<long long>(rows_p) * cols_p;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int r = static_cast<int>(i / cols_p), c = static_cast<int>(i % cols_p);
    dst[i] = r < rows && c < cols ? src[static_cast<std::size_t>(r) * cols + c] : __float2half(0.0f);
  }
}

int round_up16(int v) { return (v + 15) / 16 * 16; }

/// A zero-padded copy of src in stream-ordered memory (cudaMallocAsync): allocated and filled on
/// @p stream, freed there by the caller after the kernels that read it, so that the launcher
/// never waits and a stream capture records it all.
__half* padded_copy(const __half* src, int rows, int cols, int rows_p, int cols_p, cudaStream_t stream) {
  __half* dst = nullptr;
  CUDA_CHECK(cudaMallocAsync(&dst, static_cast<std::size_t>(rows_p) * cols_p * sizeof(__half), stream));
  const long long total = static_cast<long long>(rows_p) * cols_p;
  const int blocks = static_cast<int>(std::min<long long>((total + 255) / 256, 4096));
  pad_matrix<<<blocks, 256, 0, stream>>>(src, rows, cols, dst, rows_p, cols_p);
  CUDA_CHECK(cudaGetLastError());
  return dst;
}

/// Per device, asked once: @p ask's answer for the current device (attributes and function
/// attributes cost a driver call each; a launcher called in a timing loop should not pay them).
template <class Answer>
Answer once_per_device(std::map<int, Answer>& known, const std::function<Answer(int)>& ask) {
  static std::mutex lock;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> hold(lock);
  const auto it = known.find(device);
  if (it != known.end()) return it->second;
  return known[device] = ask(device);
}

#if !defined(GPULAB_EMULATOR)
/// Why v3 or v4 cannot run on @p device ("" when it can).
std::string support_problem(Rung rung, int device) {
  int major = 0, minor = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  cudaFuncAttributes attributes{};
  const cudaError_t loaded = cudaFuncGetAttributes(&attributes, rung == Rung::kMmaLdmatrix ? reinterpret_cast<const void*>(hgemm_v3_mma_ldmatrix)
                                                                                          : reinterpret_cast<const void*>(hgemm_v4_mma_pipelined));
  std::string reason;
  if (loaded != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: clear it
    reason = std::string("this build has no code this GPU can load (") + cudaGetErrorString(loaded) +
             "): configure for this GPU's architecture (./gpulab does, with a GPU present)";
  } else if (major < 8) {
    reason = "needs compute capability 8.0 or newer for mma.m16n8k16 and cp.async (this GPU is " + std::to_string(major) + "." +
             std::to_string(minor) + "): N/A on this GPU";
  } else if (attributes.ptxVersion < 80) {  // e.g. built for 75: the driver JIT-compiles compute_75 PTX, where the wrappers trap
    reason = "this build has no sm_80+ code for it (compiled for compute_" + std::to_string(attributes.ptxVersion) +
             "): configure for this GPU's architecture (./gpulab does, with a GPU present)";
  }
  return reason;
}
#endif

}  // namespace

bool rung_supported(Rung rung, std::string* why) {
  if (rung == Rung::kWmmaNaive || rung == Rung::kWmmaShared) return true;  // WMMA: every GPU CUDA 13 supports (sm_75+)
#if defined(GPULAB_EMULATOR)
  (void)why;
  return true;  // the emulator runs the instructions' documented behaviour
#else
  static std::map<int, std::string> v3_known, v4_known;
  const std::string reason = once_per_device<std::string>(rung == Rung::kMmaLdmatrix ? v3_known : v4_known, [rung](int device) {
    return support_problem(rung, device);
  });
  if (why != nullptr) *why = reason;
  return reason.empty();
#endif
}

void hgemm(Rung rung, int M, int N, int K, const __half* A, const __half* B, float* C, cudaStream_t stream) {
  if (M < 1 || N < 1 || K < 1) {
    throw std::invalid_argument("hgemm: M, N and K must be at least 1 (got " + std::to_string(M) + " x " + std::to_string(N) + " x " +
                                std::to_string(K) + ")");
  }
  std::string why;
  if (!rung_supported(rung, &why)) throw std::runtime_error("hgemm v" + std::to_string(static_cast<int>(rung)) + ": " + why);
  const int Mp = round_up16(M), Np = round_up16(N), Kp = round_up16(K);
  auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 32 == 0; };
  const bool padded = Mp != M || Np != N || Kp != K || !aligned(A) || !aligned(B);
  Operands o{A, B, C, M, N, Mp, Np, Kp, N % 2 == 0 && reinterpret_cast<std::uintptr_t>(C) % 8 == 0};
  if (padded) {
    o.A = padded_copy(A, M, K, Mp, Kp, stream);
    o.B = padded_copy(B, K, N, Kp, Np, stream);
  }
  const dim3 tiles(static_cast<unsigned>((Np + kBN - 1) / kBN), static_cast<unsigned>((Mp + kBM - 1) / kBM));
  switch (rung) {
    case Rung::kWmmaNaive: {
      const long long warps = static_cast<long long>(Mp / 16) * (Np / 16);
      hgemm_v1_wmma_naive<<<static_cast<unsigned>((warps + 3) / 4), 128, 0, stream>>>(o);
      break;
    }
    case Rung::kWmmaShared: hgemm_v2_wmma_shared<<<tiles, kThreads, 0, stream>>>(o); break;
    case Rung::kMmaLdmatrix: hgemm_v3_mma_ldmatrix<<<tiles, kThreads, 0, stream>>>(o); break;
    case Rung::kMmaPipelined: {
      const int bytes = static_cast<int>(kStages * kStageBytes);
      static std::map<int, bool> opted_in;  // the shared-memory opt-in, once per device
      once_per_device<bool>(opted_in, [bytes](int) {
        CUDA_CHECK(cudaFuncSetAttribute(hgemm_v4_mma_pipelined, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
        return true;
      });
      hgemm_v4_mma_pipelined<<<tiles, kThreads, static_cast<std::size_t>(bytes), stream>>>(o);
      break;
    }
    default: throw std::invalid_argument("hgemm: no rung " + std::to_string(static_cast<int>(rung)));
  }
  CUDA_CHECK(cudaGetLastError());
  if (padded) {
    // Freed in stream order, after the kernel that reads them: nothing here waits.
    CUDA_CHECK(cudaFreeAsync(const_cast<__half*>(o.A), stream));
    CUDA_CHECK(cudaFreeAsync(const_cast<__half*>(o.B), stream));
  }
}

}  // namespace lab04
