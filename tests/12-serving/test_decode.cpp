/// @file test_decode.cpp
/// @brief Lab 12, part 5 tests: paged decode attention against an fp64 softmax of the same fp16
/// keys and values, at awkward lengths (1, B − 1, B, B + 1, many blocks), block sizes 1 and 16,
/// head widths 16 and 64, one range and more ranges than positions, block ids scattered through
/// the pool and one layer of PagedCache's layout in the middle of it; the output and the
/// workspace poisoned with NaN, guard bands, inputs unmodified. On the GPU only: bytes of K and V
/// read per second against the device's copy bandwidth, verified before timing.
#include <catch2/catch.hpp>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "decode.hpp"
#include "gpulab/bench.hpp"
#include "gpulab/check.hpp"
#include "gpulab/compare.hpp"
#include "gpulab/device_buffer.hpp"
#include "gpulab/random.hpp"
#include "gpulab_device_test.hpp"
#include "gpulab_test.hpp"

using gpulab::DeviceBuffer;
using gpulab::testing::check_fact;
using gpulab::testing::check_guards;
using gpulab::testing::check_unmodified;
using gpulab::testing::check_within;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

/// A batch of sequences over a pool shaped like PagedCache's (2 layers; the kernel reads layer 1).
struct Problem {
  int heads = 2, hd = 16, B = 16, layers = 2, layer = 1, blocks = 0, table_width = 0;
  std::vector<int> lengths, tables;
  std::vector<__half> pool;  ///< blocks × layers × 2 × heads × B × hd
  std::vector<float> queries;
  std::size_t block_stride() const { return static_cast<std::size_t>(layers) * 2 * heads * B * hd; }
  std::size_t offset(int kv) const { return (static_cast<std::size_t>(layer) * 2 + kv) * heads * B * hd; }
  /// Key (kv 0) or value (kv 1) channel c of (sequence s, head h, position j), as a float.
  float at(int kv, int s, int h, int j, int c) const {
    const std::size_t block = static_cast<std::size_t>(tables[static_cast<std::size_t>(s) * table_width + j / B]);
    return __half2float(pool[block * block_stride() + offset(kv) + (static_cast<std::size_t>(h) * B + j % B) * hd + c]);
  }
};

Problem make_problem(const std::vector<int>& lengths, int heads, int hd, int B, std::uint64_t seed) {
  Problem p;
  p.heads = heads;
  p.hd = hd;
  p.B = B;
  p.lengths = lengths;
  int needed = 0;
  for (const int n : lengths) {
    p.table_width = std::max(p.table_width, (n + B - 1) / B);
    needed += (n + B - 1) / B;
  }
  p.blocks = needed + 3;  // some blocks nobody holds
  std::vector<int> ids(static_cast<std::size_t>(p.blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::mt19937_64 g(seed);
  std::shuffle(ids.begin(), ids.end(), g);  // scattered: no sequence's blocks are consecutive
  p.tables.assign(lengths.size() * static_cast<std::size_t>(p.table_width), -1);
  std::size_t next = 0;
  for (std::size_t s = 0; s < lengths.size(); ++s) {
    for (int i = 0; i < (lengths[s] + B - 1) / B; ++i) p.tables[s * static_cast<std::size_t>(p.table_width) + static_cast<std::size_t>(i)] = ids[next++];
  }
  gpulab::Rng rng(seed);
  const std::vector<float> pool = rng.uniform_vector(static_cast<std::size_t>(p.blocks) * p.block_stride(), -2.0f, 2.0f);
  p.pool.resize(pool.size());
  for (std::size_t i = 0; i < pool.size(); ++i) p.pool[i] = __float2half_rn(pool[i]);
  p.queries = rng.uniform_vector(lengths.size() * static_cast<std::size_t>(heads) * static_cast<std::size_t>(hd), -1.0f, 1.0f);
  return p;
}

/// The exact attention of the fp16 values in fp64, and each output's bound. The kernel's errors,
/// for a (sequence, head) of n positions: each score s_j = Σ_c (scale·q_c)·k_jc is within
/// δ_j = (hd + 2)·u·scale·Σ_c |q_c·k_jc| (the scaling, then hd products summed in any order);
/// a softmax moves by at most 2·max δ in relative terms when its inputs move by δ; each weight
/// passes through at most n rescalings and exponentials (expf within 2 ulp: 4u each) and the
/// sums of l and acc over n terms in any order (n·u each), the merge adding the same once more.
/// So |out_c − exact_c| ≤ (2·max δ + (8n + 16)·u)·max_j |v_jc|, doubled for the terms of second
/// order. u = 2⁻²⁴.
struct Expected {
  std::vector<double> value, bound;
};

Expected expected_attention(const Problem& p) {
  const double u = gpulab::kFp32UnitRoundoff;
  const float scale_f = 1.0f / std::sqrt(static_cast<float>(p.hd));
  Expected e;
  for (std::size_t s = 0; s < p.lengths.size(); ++s) {
    const int n = p.lengths[s];
    for (int h = 0; h < p.heads; ++h) {
      const float* q = p.queries.data() + (s * static_cast<std::size_t>(p.heads) + static_cast<std::size_t>(h)) * static_cast<std::size_t>(p.hd);
      std::vector<double> score(static_cast<std::size_t>(n));
      double top = -INFINITY, delta = 0.0;
      for (int j = 0; j < n; ++j) {
        double dot = 0.0, magnitude = 0.0;
        for (int c = 0; c < p.hd; ++c) {
          const double term = static_cast<double>(q[c] * scale_f) * p.at(0, static_cast<int>(s), h, j, c);
          dot += term;
          magnitude += std::fabs(term);
        }
        score[static_cast<std::size_t>(j)] = dot;
        top = std::max(top, dot);
        delta = std::max(delta, (p.hd + 2) * u * magnitude);
      }
      double total = 0.0;
      for (double& x : score) total += x = std::exp(x - top);
      for (int c = 0; c < p.hd; ++c) {
        double out = 0.0, vmax = 0.0;
        for (int j = 0; j < n; ++j) {
          const double v = p.at(1, static_cast<int>(s), h, j, c);
          out += score[static_cast<std::size_t>(j)] / total * v;
          vmax = std::max(vmax, std::fabs(v));
        }
        e.value.push_back(out);
        e.bound.push_back(2.0 * (2.0 * delta + (8.0 * n + 16.0) * u) * vmax);
      }
    }
  }
  return e;
}

/// @p p on the device, its output and the workspace of @p splits ranges poisoned with NaN (a
/// range's record must be written even when it holds no position), and the kernel's arguments.
struct OnDevice {
  DeviceBuffer<__half> pool;
  DeviceBuffer<float> queries, out;
  DeviceBuffer<int> tables, lengths;
  DeviceBuffer<float> workspace;
  lab12::PagedAttention a;
  OnDevice(const Problem& p, int splits)
      : pool(p.pool), queries(p.queries), out(p.queries.size()), tables(p.tables), lengths(p.lengths),
        workspace(lab12::decode_workspace_floats(static_cast<int>(p.lengths.size()), p.heads, p.hd, splits)) {
    out.fill(kNaN);
    workspace.fill(kNaN);
    a.keys = pool.data() + p.offset(0);
    a.values = pool.data() + p.offset(1);
    a.block_stride = p.block_stride();
    a.queries = queries.data();
    a.tables = tables.data();
    a.lengths = lengths.data();
    a.out = out.data();
    a.sequences = static_cast<int>(p.lengths.size());
    a.heads = p.heads;
    a.hd = p.hd;
    a.block_size = p.B;
    a.table_width = p.table_width;
    a.scale = 1.0f / std::sqrt(static_cast<float>(p.hd));
  }
};

/// Runs the learner's kernel on @p p with @p splits ranges; checks values, guards, inputs.
void check_problem(const Problem& p, int splits, const std::string& what) {
  OnDevice d(p, splits);
  DeviceBuffer<__half>& pool = d.pool;
  DeviceBuffer<float>&queries = d.queries, &out = d.out, &workspace = d.workspace;
  DeviceBuffer<int>&tables = d.tables, &lengths = d.lengths;
  lab12::paged_decode_attention(d.a, splits, workspace.data(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const Expected e = expected_attention(p);
  check_within(out.download(), e.value, e.bound, what,
               "NaN: an output never written, or a range record (m, l, acc) never written or read from the wrong place; every range's "
               "record must be written, an empty one as m = -inf, l = 0; wrong everywhere with splits > 1 only: the merge must weigh "
               "each range by exp(m_i - max m)");
  check_guards(out, "out");
  check_guards(workspace, "workspace");
  check_unmodified(pool, p.pool, "the key and value pool");
  check_unmodified(queries, p.queries, "queries");
  check_unmodified(tables, p.tables, "block tables");
  check_unmodified(lengths, p.lengths, "lengths");
}

}  // namespace

TEST_CASE("paged_decode_attention refuses what it cannot run", "[cpu][12.5]") {
  lab12::PagedAttention a;
  float dummy = 0.0f;
  alignas(16) const __half h[8]{};
  const int i = 0;
  a.keys = a.values = h;
  a.queries = &dummy;
  a.out = &dummy;
  a.tables = a.lengths = &i;
  a.sequences = 1;
  a.heads = 1;
  a.hd = 16;
  a.block_size = 16;
  a.table_width = 1;
  a.block_stride = 512;
  a.scale = 0.25f;
  std::vector<std::string> bad;
  const auto refused = [&](lab12::PagedAttention b, int splits, float* workspace) {
    try {
      lab12::paged_decode_attention(b, splits, workspace, nullptr);
    } catch (const std::invalid_argument&) {
      return true;
    } catch (...) {
    }
    return false;
  };
  using Change = void (*)(lab12::PagedAttention&, const __half*);
  const std::vector<std::pair<const char*, Change>> changes = {
      {"hd = 48", [](lab12::PagedAttention& x, const __half*) { x.hd = 48; }},
      {"hd = 8", [](lab12::PagedAttention& x, const __half*) { x.hd = 8; }},
      {"B = 0", [](lab12::PagedAttention& x, const __half*) { x.block_size = 0; }},
      {"block_stride = 500", [](lab12::PagedAttention& x, const __half*) { x.block_stride = 500; }},
      {"no sequences", [](lab12::PagedAttention& x, const __half*) { x.sequences = 0; }},
      {"keys 2 bytes off 16", [](lab12::PagedAttention& x, const __half* aligned) { x.keys = aligned + 1; }},
  };
  for (const auto& [name, change] : changes) {
    lab12::PagedAttention b = a;
    change(b, h);
    if (!refused(b, 1, &dummy)) bad.push_back(name);
  }
  if (!refused(a, 0, &dummy)) bad.push_back("splits = 0");
  if (!refused(a, 1, nullptr)) bad.push_back("no workspace");
  std::string list;
  for (const std::string& x : bad) list += (list.empty() ? "" : ", ") + x;
  check_fact(bad.empty(), "bad arguments throw std::invalid_argument before any launch", bad.empty() ? "all 8 refused" : "not refused: " + list,
             "check every argument the header names before launching anything");
}

TEST_CASE("paged decode attention is right at awkward lengths with any number of ranges", "[gpu][12.5]") {
  struct Shape {
    int heads, hd, B;
  };
  for (const Shape sh : {Shape{2, 16, 16}, Shape{2, 64, 16}, Shape{3, 32, 1}}) {
    const int B = sh.B;
    const std::vector<int> lengths = {1, std::max(1, B - 1), B, B + 1, 5 * B + 3};
    const Problem p = make_problem(lengths, sh.heads, sh.hd, B, 1000 + static_cast<std::uint64_t>(sh.hd) + static_cast<std::uint64_t>(B));
    for (const int splits : {1, 3, 8}) {
      check_problem(p, splits,
                    "paged decode attention, hd " + std::to_string(sh.hd) + ", B " + std::to_string(B) + ", " + std::to_string(splits) +
                        " range(s), lengths 1 to " + std::to_string(lengths.back()));
    }
  }
}

TEST_CASE("paged decode attention bandwidth", "[gpu][perf][12.5]") {
  // 32 sequences of 2048 positions, 8 heads of 128 (a 7B model's layer with 8 of its 32 heads):
  // 268 MB of fp16 keys and values, more than 4 × any L2. Blocks of 16, scattered. 4 ranges a
  // sequence: 32 × 8 × 4 = 1024 thread blocks, enough for every SM.
  const bool small = gpulab::testing::small_run();
  const int S = small ? 4 : 32, H = 8, hd = 128, B = 16, n = small ? 256 : 2048, splits = 4;
  const Problem p = make_problem(std::vector<int>(static_cast<std::size_t>(S), n), H, hd, B, 77);
  OnDevice d(p, splits);
  const lab12::PagedAttention& a = d.a;
  DeviceBuffer<float>&out = d.out, &workspace = d.workspace;
  lab12::paged_decode_attention(a, splits, workspace.data(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  // Verified before timing: the first and the last sequence, all heads.
  {
    Problem first_last = p;
    first_last.lengths = {n, n};
    first_last.tables.assign(p.tables.begin(), p.tables.begin() + p.table_width);
    first_last.tables.insert(first_last.tables.end(), p.tables.end() - p.table_width, p.tables.end());
    first_last.queries.assign(p.queries.begin(), p.queries.begin() + H * hd);
    first_last.queries.insert(first_last.queries.end(), p.queries.end() - H * hd, p.queries.end());
    const Expected e = expected_attention(first_last);
    const std::vector<float> all = out.download();
    std::vector<float> got(all.begin(), all.begin() + H * hd);
    got.insert(got.end(), all.end() - H * hd, all.end());
    check_within(got, e.value, e.bound, "paged decode attention 32 x 2048 positions (verified before timing)");
  }
  const gpulab::BenchResult r = gpulab::bench([&](cudaStream_t s) { lab12::paged_decode_attention(a, splits, workspace.data(), s); });
  const double bytes = 2.0 * S * H * static_cast<double>(n) * hd * sizeof(__half);  // every key and value once
  const double gbs = gpulab::gb_per_s(bytes, r.median_ms);
  gpulab::testing::record_performance("paged_decode", gbs, "GB/s", gpulab::measure_d2d_memcpy_gbs(static_cast<std::size_t>(bytes / 2)),
                                      "D2D cudaMemcpy", {{"sequences", S}, {"positions", n}, {"heads", H}, {"hd", hd}, {"splits", splits},
                                                         {"median_ms", r.median_ms}, {"timing", r.describe()},
                                                         {"flops_per_byte", 1.0},  // 4·hd FLOPs for 4·hd bytes a position
                                                         {"peaks", gpulab::testing::peak_fields()},
                                                         {"gpu_state", gpulab::testing::gpu_state_fields(r)}});
}
