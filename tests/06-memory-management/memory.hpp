/// @file memory.hpp
/// @brief Lab 06 — memory management: the functions and classes you implement in
/// labs/06-memory-management/ (budget.cpp, allocator.cpp, overlap.cu, checkpoint.cpp). Read
/// lessons/06-memory-management.md.
///
/// This header belongs to the tests: do not change it. Four parts: the memory budget of
/// training (how many bytes, before anything is allocated); a caching allocator like PyTorch's
/// CUDACachingAllocator, over a backend that is either the device (cudaMalloc) or a mock device
/// that the tests drive by hand (addresses without memory, streams and events they complete);
/// copy/compute overlap with pinned memory and streams; activation checkpointing on a
/// gpulab::nn MLP.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpulab/nn.hpp"

namespace lab06 {

namespace nn = gpulab::nn;

// ---------------------------------------------------------------------------------------------
// 06.1 The memory budget
// ---------------------------------------------------------------------------------------------

/// How the model is trained.
enum class Precision {
  kFp32,   ///< weights, gradients and optimizer state in fp32
  kMixed,  ///< fp16 (or bf16) weights and gradients, an fp32 master copy of the weights, fp32 optimizer state
};
/// Which optimizer keeps which state.
enum class OptimizerKind {
  kSgd,          ///< no state
  kSgdMomentum,  ///< one fp32 velocity per parameter
  kAdam,         ///< two fp32 moments per parameter
};

/// Bytes of the model state of @p parameters parameters.
struct ModelState {
  double weights = 0;    ///< the weights the forward reads (fp32: 4 B each; mixed: 2 B)
  double gradients = 0;  ///< their gradients (fp32: 4; mixed: 2)
  double optimizer = 0;  ///< the optimizer's state, with mixed precision's fp32 master weights (mixed Adam: 4 + 4 + 4)
  double total() const { return weights + gradients + optimizer; }
};

/// TODO(06.1): the model state: weights, gradients, optimizer (Rajbhandari et al., "ZeRO",
/// 2020, §3.1: mixed-precision Adam is 2 + 2 + 12 = 16 bytes per parameter; fp32 Adam is
/// 4 + 4 + 8, the same 16).
ModelState model_state_bytes(double parameters, Precision precision, OptimizerKind optimizer);

/// TODO(06.1): bytes of activations a training step keeps for backward in a gpulab::nn MLP of
/// @p widths (Linear, ReLU, …, Linear, as nn::Sequential::mlp builds it) for a batch of
/// @p batch, at @p bytes_per_value bytes a value: each Linear keeps its input, each ReLU its
/// input (nn::Layer::saved_floats).
double mlp_activation_bytes(const std::vector<std::size_t>& widths, std::size_t batch, double bytes_per_value);

/// How much of a transformer layer's activations is recomputed in backward instead of kept.
enum class Recompute {
  kNone,       ///< keep everything: s·b·h·(34 + 5·a·s/h) bytes per layer
  kSelective,  ///< recompute the attention core (the 5·a·s/h part): s·b·h·34
  kFull,       ///< keep only each layer's input: 2·s·b·h
};

/// TODO(06.1): activation bytes of a transformer of @p layers layers, hidden size @p hidden,
/// @p heads heads, sequence @p seq, micro-batch @p batch, 16-bit activations, no tensor or
/// sequence parallelism — Korthikanti et al., "Reducing Activation Recomputation in Large
/// Transformer Models" (2022), §4: per layer s·b·h·(34 + 5·a·s/h).
double transformer_activation_bytes(int layers, double hidden, int heads, double seq, double batch, Recompute recompute);

/// TODO(06.1): the peak activation memory, in floats, of a checkpointed step (06.6): layers
/// [bounds[k], bounds[k + 1]) are segment k; each segment's input is kept (@p input_floats[k]
/// floats); in backward, segment k's forward is run again and its activations (@p saved_floats
/// of its layers, one entry per layer) live until its backward ends, while the inputs of
/// segments 0 … k are still kept. Returns max over k of (Σ_{j ≤ k} input_floats[j] + Σ_{l in k}
/// saved_floats[l]). (Without checkpointing, one segment: the input plus every layer's.)
double checkpoint_peak_floats(const std::vector<double>& saved_floats, const std::vector<double>& input_floats, const std::vector<std::size_t>& bounds);

// ---------------------------------------------------------------------------------------------
// 06.2, 06.3, 06.4 A caching allocator
// ---------------------------------------------------------------------------------------------

/// A stream, as the backend numbers them (0: the default stream).
using Stream = int;
/// An event recorded on a stream, as the backend numbers them.
using Event = std::uint64_t;

/// Where the allocator's memory comes from: the device, or the tests' mock device.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  /// @p bytes of device memory (a multiple of 512), or nullptr when there is none (never throws).
  virtual void* malloc(std::size_t bytes) = 0;
  /// Gives back what malloc returned.
  virtual void free(void* pointer) = 0;
  /// Records an event on @p stream: it completes once the work queued on the stream so far has.
  virtual Event record_event(Stream stream) = 0;
  /// Whether @p event has completed (never blocks).
  virtual bool query(Event event) = 0;
};

/// The caching allocator's exact rules (the tests predict every address from them):
constexpr std::size_t kMinBlock = 512;                  ///< every size is rounded up to a multiple of 512 B (0 → 512)
constexpr std::size_t kSmallSize = std::size_t{1} << 20;  ///< requests ≤ 1 MiB go to the small pool
constexpr std::size_t kSmallSegment = std::size_t{2} << 20;  ///< the small pool's segments are 2 MiB
constexpr std::size_t kMidSize = std::size_t{10} << 20;  ///< large requests ≤ 10 MiB get a 20 MiB segment
constexpr std::size_t kMidSegment = std::size_t{20} << 20;
constexpr std::size_t kRoundLarge = std::size_t{2} << 20;  ///< larger ones a segment of their size rounded up to 2 MiB

/// What the allocator has done.
struct AllocatorStats {
  std::size_t allocated = 0;       ///< bytes of live blocks (their sizes: more than the rounded request when a block was not split)
  std::size_t reserved = 0;        ///< bytes of segments taken from the backend and not given back
  std::size_t peak_allocated = 0;  ///< the most `allocated` has been
  std::size_t peak_reserved = 0;   ///< the most `reserved` has been
  std::size_t backend_mallocs = 0;  ///< backend malloc calls that succeeded
  std::size_t backend_frees = 0;    ///< backend free calls
  std::size_t failed_mallocs = 0;   ///< backend malloc calls that returned nullptr
  /// 1 − allocated / reserved (0 when nothing is reserved): the share of reserved memory not in use.
  double fragmentation() const { return reserved > 0 ? 1.0 - static_cast<double>(allocated) / static_cast<double>(reserved) : 0.0; }
};

/// TODO(06.3): thrown when the backend refuses even after the cache was emptied. what(): "out of
/// memory: tried to allocate R; A allocated, V reserved, the largest free block F", with R the
/// rounded request, A and V the stats after the cache was emptied, F the largest free block left
/// (of any pool and stream; 0 B if none), sizes as format_bytes writes them — what PyTorch users
/// asked for (pytorch#29554).
/// Each refusal counts in failed_mallocs.
class OutOfMemory : public std::runtime_error {
 public:
  explicit OutOfMemory(const std::string& what) : std::runtime_error(what) {}
};

/// "512 B", "1.50 KiB", "20.00 MiB", "3.25 GiB": B below 1 KiB, else the size in the largest unit
/// that is ≤ it, as printf's "%.2f" writes it (so 1 MiB − 1 B is "1024.00 KiB").
std::string format_bytes(std::size_t bytes);

/// A caching allocator (PyTorch's CUDACachingAllocator, simplified to exact rules).
///
/// allocate(n, stream): round n up to a multiple of 512 (at least 512). Pool: small if the
/// rounded size ≤ 1 MiB, else large. Among the free blocks of that pool and that stream, take
/// the smallest that fits, the lowest address among equals, skipping — when max_split is set —
/// blocks ≥ max_split for requests < max_split. If none fits, take a new segment from the
/// backend: 2 MiB (small pool), 20 MiB (rounded size ≤ 10 MiB), else the rounded size rounded up
/// to 2 MiB; if the backend refuses, do what empty_cache does (below: events first) and ask once
/// more; if it still refuses, throw OutOfMemory. The block found (or the new segment, as one block) is split when
/// its remainder is ≥ 512 B (small pool) or > 1 MiB (large pool), and is never split when it is
/// ≥ max_split: the front part is returned, the remainder stays free, on the same stream.
///
/// free(p): the block becomes free and merges with the free blocks next to it in its segment
/// (before and after). Unless record_stream was called for it: then the free waits until an event
/// recorded, at free time, on each such stream has completed (checked at the start of each
/// allocate and in empty_cache; a block waiting is neither free nor counted as allocated).
///
/// empty_cache(): every segment that is one whole free block goes back to the backend.
class CachingAllocator {
 public:
  /// Memory from @p backend (not owned); @p max_split: blocks this large or larger are never split
  /// (SIZE_MAX: no limit). Like PyTorch's max_split_size_mb it must be above 20 MiB (a smaller one
  /// would leave the 20 MiB segments unsplittable): std::invalid_argument otherwise (given).
  explicit CachingAllocator(DeviceBackend& backend, std::size_t max_split = SIZE_MAX);
  /// Gives every segment back (live blocks too: the owner of the memory is gone).
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// TODO(06.2): @p bytes for work on @p stream (rules above; TODO(06.3) when the backend refuses).
  void* allocate(std::size_t bytes, Stream stream = 0);
  /// TODO(06.4): gives back a pointer allocate returned (std::invalid_argument otherwise).
  void free(void* pointer);
  /// TODO(06.4): the block of @p pointer is also used by work on @p stream (nothing to do for its
  /// own); std::invalid_argument unless @p pointer is a live block (checked for you).
  void record_stream(void* pointer, Stream stream);
  /// TODO(06.4): gives whole free segments back to the backend (after processing events).
  void empty_cache();
  /// What it has done.
  AllocatorStats stats() const;
  /// The rounded size of the live block at @p pointer (std::invalid_argument if there is none).
  std::size_t block_size(void* pointer) const;

  struct State;  ///< the allocator's state (defined in allocator.cpp)

 private:
  std::unique_ptr<State> state_;
};

// ---------------------------------------------------------------------------------------------
// 06.5 Copy/compute overlap
// ---------------------------------------------------------------------------------------------

/// TODO(06.5): the time of a chunked H2D → kernel → D2H pipeline of @p chunks chunks whose
/// stages take @p h, @p c and @p d each (the whole job's times divided by the chunks), on as many
/// streams as chunks (or enough streams that a chunk's stream is free when it is its turn): with
/// two copy engines (H2D and D2H at once) the stages of different chunks overlap fully,
/// h + c + d + (chunks − 1)·max(h, c, d); with one copy engine the two copies share it,
/// h + c + d + (chunks − 1)·max(h + d, c). (Two copies at once on PCIe rarely both reach one
/// direction's rate: the model is a lower bound, tight when the kernel dominates.) @p copy_engines is
/// cudaDeviceProp::asyncEngineCount (0 or 1: one; 2 or more: two). Throws std::invalid_argument
/// unless chunks ≥ 1.
double overlap_model_seconds(double h, double c, double d, int chunks, int copy_engines);

/// TODO(06.5) on the GPU: y = f(x) for @p n floats of pinned host memory @p x into pinned @p y,
/// in @p chunks chunks, each on its own stream (chunk i on stream i mod streams): copy the chunk
/// in (cudaMemcpyAsync), launch_transform over it, copy it out, so that one chunk's copies overlap
/// another's kernel. Returns the seconds from the first copy to the last (events). @p streams ≥ 1.
/// Throws std::invalid_argument when x or y is not pinned (cudaPointerGetAttributes): copies from
/// pageable memory are staged synchronously and the pipeline would silently run serially.
double overlapped_transform(const float* x, float* y, std::size_t n, int chunks, int streams);
/// The same with one stream and no chunks (copy in, kernel, copy out): the baseline (given).
double serial_transform(const float* x, float* y, std::size_t n);
/// The element-wise function both run (given): kTransformRounds iterations of
/// v = sinf(v)·0.999 + x from v = x, so that the kernel's time can be set against the copies'.
constexpr int kTransformRounds = 64;
/// y = f(x) on the host (the tests' yardstick: the device's sinf is within 2 ulps and nvcc fuses the
/// multiply-add, so the two differ in the last bits).
float transform_host(float x);
/// Launches the kernel over @p n elements on @p stream (a cudaStream_t, given as void* so that
/// this header needs no CUDA).
void launch_transform(const float* x, float* y, std::size_t n, void* stream);

// ---------------------------------------------------------------------------------------------
// 06.6 Activation checkpointing
// ---------------------------------------------------------------------------------------------

/// TODO(06.6): one forward and backward of @p model on @p x (mean softmax cross-entropy against
/// @p labels), checkpointed at @p bounds: segment k is layers [bounds[k], bounds[k + 1]). Forward
/// keeps only each segment's input (run each segment with a scratch vector of nn::Saved and drop
/// it); backward, from the last segment to the first, runs the segment's forward again from its
/// input, then its backward, then drops its activations and its input. Gradients accumulate into
/// the parameters' grad exactly as model.forward + model.backward would (bit for bit). Returns
/// the loss.
double checkpointed_step(nn::Sequential& model, const nn::Tensor& x, const std::vector<int>& labels, const std::vector<std::size_t>& bounds);

}  // namespace lab06
