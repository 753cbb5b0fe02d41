/// @file emu.hpp
/// @brief A small cooperative emulator of CUDA thread blocks on the CPU, for checking a lab's
/// kernels *for their logic* where no GPU is available (`gpulab emulate`, and `gpulab grade` without a GPU).
///
/// Not a grade and never a GPU result. It runs one block at a time, each thread as a fiber (a
/// stack of its own; switched by emu_switch.cpp on x86-64, by ucontext elsewhere) that runs
/// until its next __syncthreads() or warp-level call (__shfl_down_sync), in thread order (or
/// reversed: EMU_ORDER=reverse), a warp whose lanes all reached a warp-level call going on at once
/// to its next barrier (a warp running ahead of the others). So a missing barrier usually shows as wrong values (a thread
/// reads a tile its neighbours have not written yet), a barrier some threads skip is reported,
/// and every index is exercised. Device memory is host memory; the runtime calls the labs and
/// libgpulab use are stand-ins (below). Timing, memory models, races between blocks and speed
/// are not emulated.
#pragma once

/// Defined in every file built for the emulator, so that a header can give the emulator its own
/// version of something only a GPU has (lab 04's PTX wrappers: tests/04-tensor-cores/tensor_core.cuh).
#define GPULAB_EMULATOR 1

#include <cxxabi.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <map>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct alignas(8) float2 {
  float x, y;
};
inline float2 make_float2(float a, float b) { return {a, b}; }
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
using cudaStream_t = void*;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static  // one block runs at a time, so a function-static array is its shared memory
#define __align__(n) __attribute__((aligned(n)))

inline dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace emu {

enum class State { kRunning, kAtBarrier, kAtWarpSync, kDone };

// A fiber switch on x86-64 saves what the ABI says a callee keeps (six registers, the stack
// pointer, the SSE and x87 control words): a few nanoseconds. ucontext's swapcontext also saves
// the signal mask, a system call each way, which was a third of an emulated GEMM's time.
#if defined(__x86_64__) && defined(__linux__)
#define GPULAB_EMU_FAST_SWITCH 1
/// Saves the running context's stack pointer in *@p save and resumes the one at @p load (emu_switch.cpp).
extern "C" void gpulab_emu_switch(void** save, void* load);
/// Where a new fiber starts: calls gpulab_emu_fiber_main on the fiber's own stack (emu_switch.cpp).
extern "C" void gpulab_emu_fiber_start();
#endif

struct Fiber {
#ifdef GPULAB_EMU_FAST_SWITCH
  void* sp = nullptr;
#else
  ucontext_t context;
#endif
  std::unique_ptr<char[]> stack;
  State state = State::kRunning;
  dim3 id;
  unsigned mask = 0;  ///< the mask of the warp-level call it waits at
};

inline constexpr std::size_t kStackBytes = 1 << 16;
#ifdef GPULAB_EMU_FAST_SWITCH
inline void* scheduler = nullptr;
#else
inline ucontext_t scheduler;
#endif
inline Fiber* current = nullptr;
inline std::function<void()> kernel_call;
inline std::vector<unsigned char> dynamic_shared_memory;  // `extern __shared__` arrays of the launch
/// Counts the blocks run so far (per-thread state that lives for one block, such as the pending
/// copies of emu_tensor.hpp, resets when it changes).
inline unsigned long long block_serial = 0;
struct Fiber;
/// The threads of the block being run (for warp-wide operations that need every lane).
inline std::vector<Fiber>* block_fibers = nullptr;

/// A fault a thread found (a bad shuffle mask, an exception from device code): the block stops and
/// the launch reports it.
inline std::string thread_error;

inline void fail_here(const std::string& what);

inline void fiber_entry() {
  try {
    kernel_call();
  } catch (const std::exception& e) {
    fail_here(std::string("an exception in device code: ") + e.what());
  }
  current->state = State::kDone;
}

/// From the running thread back to the scheduler; returns when the scheduler resumes it.
inline void to_scheduler() {
#ifdef GPULAB_EMU_FAST_SWITCH
  gpulab_emu_switch(&current->sp, scheduler);
#else
  swapcontext(&current->context, &scheduler);
#endif
}

/// From the scheduler to @p f; returns when @p f reaches a barrier, a warp-level call or its end.
inline void to_fiber(Fiber& f) {
#ifdef GPULAB_EMU_FAST_SWITCH
  gpulab_emu_switch(&scheduler, f.sp);
#else
  swapcontext(&scheduler, &f.context);
#endif
}

inline void barrier() {
  current->state = State::kAtBarrier;
  to_scheduler();
}

/// Waits until every lane of this warp that has not exited is here too.
inline void warp_sync() {
  current->state = State::kAtWarpSync;
  to_scheduler();
}

/// The running thread as text: "block (1, 0, 0), thread (33, 0, 0)".
inline std::string where_am_i();

/// Records @p what for the running thread and ends it: the scheduler then stops the launch.
inline void fail_here(const std::string& what) {
  if (thread_error.empty()) thread_error = what + " (" + where_am_i() + ")";
  current->state = State::kDone;
  to_scheduler();
}

/// EMU_ORDER=reverse runs the threads of each step last to first: a hazard between threads that
/// the forward order hides (a thread reading what a later one writes in the same step) shows.
inline bool reverse_order() {
  static const bool reverse = [] {
    const char* o = std::getenv("EMU_ORDER");
    return o != nullptr && std::string(o) == "reverse";
  }();
  return reverse;
}

inline unsigned linear_thread() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }

inline std::string where_am_i() {
  char text[160];
  std::snprintf(text, sizeof text, "block (%u, %u, %u), thread (%u, %u, %u)", blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x,
                threadIdx.y, threadIdx.z);
  return text;
}

/// The kernel being run, for the fault handler's message (dladdr names it).
inline const void* running_kernel = nullptr;

/// A read or write outside every allocation ends the process with where it happened: the
/// emulator's second run places each allocation's end against an inaccessible page, so one
/// element past the end faults (a GPU would read the next allocation or garbage, silently).
inline void on_fault(int signal) {
  char text[400];
  Dl_info info{};
  const char* mangled = running_kernel != nullptr && dladdr(running_kernel, &info) != 0 && info.dli_sname ? info.dli_sname : "?";
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);  // not async-signal-safe: we exit anyway
  const char* kernel = demangled != nullptr ? demangled : mangled;
  const int n = running_kernel == nullptr
                    ? std::snprintf(text, sizeof text, "emulate: %s outside device memory, in host code\n", signal == SIGSEGV ? "an access" : "a fault")
                    : std::snprintf(text, sizeof text,
                                    "emulate: a read or write outside the buffers it was given, in kernel %s, %s "
                                    "(an index past the end of an array?)\n",
                                    kernel, where_am_i().c_str());
  if (n > 0) (void)!write(2, text, static_cast<std::size_t>(n));
  _exit(1);
}

inline void install_fault_handler() {
  static bool installed = [] {
    static char alternate[1 << 16];  // the fibers' stacks are small: handle faults on a stack of its own
    stack_t ss{};
    ss.ss_sp = alternate;
    ss.ss_size = sizeof alternate;
    sigaltstack(&ss, nullptr);
    struct sigaction action {};
    action.sa_handler = on_fault;
    action.sa_flags = SA_ONSTACK;
    sigaction(SIGSEGV, &action, nullptr);
    sigaction(SIGBUS, &action, nullptr);
    return true;
  }();
  (void)installed;
}

/// The most static + dynamic shared memory a block may use: 48 KB unless the kernel was allowed
/// more with cudaFuncSetAttribute (as on a GPU), per kernel.
inline std::vector<std::pair<const void*, std::size_t>>& dynamic_smem_limits() {
  static std::vector<std::pair<const void*, std::size_t>> limits;
  return limits;
}
inline std::size_t static_shared_of(const void* kernel);

/// What a GPU refuses at launch, as cudaGetLastError would say it.
inline void check_launch(dim3 grid, dim3 block, std::size_t smem, const void* kernel) {
  const unsigned long long threads = static_cast<unsigned long long>(block.x) * block.y * block.z;
  std::string why;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) why = "a grid with 0 blocks";
  else if (grid.y > 65535 || grid.z > 65535) why = "gridDim.y or gridDim.z above 65535";
  else if (threads == 0 || threads > 1024) why = "a block of " + std::to_string(threads) + " threads (1 to 1024)";
  else if (block.x > 1024 || block.y > 1024 || block.z > 64) why = "a block dimension above its limit (1024, 1024, 64)";
  std::size_t allowed = 48 * 1024;
  for (const auto& [k, limit] : dynamic_smem_limits()) {
    if (k == kernel) allowed = std::max(allowed, limit + static_shared_of(kernel));
  }
  if (why.empty() && static_shared_of(kernel) + smem > allowed) {
    why = std::to_string(static_shared_of(kernel) + smem) + " bytes of shared memory per block (the limit is " + std::to_string(allowed) +
          "; more needs cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, ...))";
  }
  if (!why.empty()) throw std::runtime_error("emulate: invalid launch configuration: " + why + " (a GPU would refuse it)");
}

template <class T>
T* dynamic_shared() {
  return reinterpret_cast<T*>(dynamic_shared_memory.data());
}

/// True (and the launch recorded) when @p stream is being captured into a graph (defined below).
inline bool record_if_capturing(cudaStream_t stream, const void* kernel, dim3 grid, dim3 block, std::size_t smem);

/// `kernel<<<grid, block, smem, stream>>>(args)` becomes `emu::Launch(grid, block, smem, stream).run(...)`.
struct Launch {
  dim3 grid, block;
  std::size_t smem;
  cudaStream_t stream;
  const void* kernel = nullptr;
  Launch(dim3 g, dim3 b, std::size_t dynamic_smem = 0, cudaStream_t s = nullptr)
      : grid(g), block(b), smem(dynamic_smem), stream(s) {}
  /// Names the kernel (for a capture; the emulator transform, tools/gpulab/author/emu_transform.cpp, adds it).
  template <class F>
  Launch& of(F* k) {
    kernel = reinterpret_cast<const void*>(k);
    return *this;
  }

  /// Sets @p f to run the kernel from its start as thread @p id. Its own function, not inline:
  /// getcontext() may return twice (as setjmp does), and the loop variables of run() must not
  /// live in a frame that calls it (-Wclobbered).
  __attribute__((noinline)) static void start_fiber(Fiber& f, dim3 id) {
    f.id = id;
    f.state = State::kRunning;
#ifdef GPULAB_EMU_FAST_SWITCH
    // The frame gpulab_emu_switch pops (emu_switch.cpp): the control words, six registers, then
    // the address it returns to, the start of the fiber; the top of the stack 16-byte aligned.
    const auto top = (reinterpret_cast<std::uintptr_t>(f.stack.get()) + kStackBytes) & ~static_cast<std::uintptr_t>(15);
    auto* frame = reinterpret_cast<std::uint64_t*>(top) - 9;
    std::memset(frame, 0, 9 * sizeof(std::uint64_t));
    std::uint32_t mxcsr = 0;
    std::uint16_t fpu = 0;
    asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(mxcsr), "=m"(fpu));
    std::memcpy(frame, &mxcsr, 4);
    std::memcpy(reinterpret_cast<char*>(frame) + 4, &fpu, 2);
    frame[8] = reinterpret_cast<std::uint64_t>(&gpulab_emu_fiber_start);
    f.sp = frame;
#else
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack.get();
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = &scheduler;
    makecontext(&f.context, fiber_entry, 0);
#endif
  }

  void run(std::function<void()> call) {
    check_launch(grid, block, smem, kernel);
    if (record_if_capturing(stream, kernel, grid, block, smem)) return;  // captured: recorded, not run
    install_fault_handler();
    running_kernel = kernel;
    thread_error.clear();
    kernel_call = std::move(call);
    gridDim = grid;
    blockDim = block;
    dynamic_shared_memory.assign(smem + 16, 0xCD);  // not zero: a GPU does not clear it either
    const unsigned n = block.x * block.y * block.z;
    std::vector<Fiber> fibers(n);
    for (Fiber& f : fibers) f.stack.reset(new char[kStackBytes]);
    block_fibers = &fibers;
    for (unsigned bz = 0; bz < grid.z; ++bz) {
      for (unsigned by = 0; by < grid.y; ++by) {
        for (unsigned bx = 0; bx < grid.x; ++bx) {
          blockIdx = dim3(bx, by, bz);
          ++block_serial;
          for (unsigned i = 0; i < n; ++i) {
            start_fiber(fibers[i], dim3(i % block.x, (i / block.x) % block.y, i / (block.x * block.y)));
          }
          // Run every runnable thread to its next barrier, warp sync or end, in thread order;
          // then release a warp whose live lanes all wait at a warp sync, or the block when all
          // its live threads wait at __syncthreads(); until every thread has ended.
          for (;;) {
            for (unsigned k = 0; k < n; ++k) {
              const unsigned i = reverse_order() ? n - 1 - k : k;
              run_fiber(fibers[i]);
              // A warp runs ahead: once its last lane of this pass waits at a warp-level call
              // (an mma, a shuffle) with the others, it goes on at once, to its next barrier,
              // before the warps after it have had their turn — as a fast warp does on a GPU. A
              // warp that reads shared memory and then overwrites it without a barrier between
              // (the next tile's load) so corrupts what the other warps have yet to read.
              const bool last_of_warp = reverse_order() ? i % 32 == 0 : (i % 32 == 31 || i == n - 1);
              if (!last_of_warp) continue;
              const unsigned w = i / 32;
              while (release_warp(fibers, w, n)) {
                for (unsigned j = 0; j < 32; ++j) {
                  const unsigned lane = reverse_order() ? 31 - j : j;
                  if (w * 32 + lane < n) run_fiber(fibers[w * 32 + lane]);
                }
              }
            }
            unsigned done = 0, at_barrier = 0, at_warp = 0;
            for (const Fiber& f : fibers) {
              done += f.state == State::kDone;
              at_barrier += f.state == State::kAtBarrier;
              at_warp += f.state == State::kAtWarpSync;
            }
            if (done == n) break;
            bool released = false;
            for (unsigned w = 0; w * 32 < n; ++w) released = release_warp(fibers, w, n) || released;
            if (released) continue;
            if (at_barrier > 0 && at_warp == 0 && done == 0) {
              for (Fiber& f : fibers) f.state = State::kRunning;
              continue;
            }
            // On a GPU this hangs (or is undefined); here it is an error the caller can report.
            char what[240];
            std::snprintf(what, sizeof what,
                          "emulate: block (%u, %u, %u) is stuck: %u threads at __syncthreads(), %u at a warp-level "
                          "call, %u ended (a barrier that not every thread reaches)",
                          bx, by, bz, at_barrier, at_warp, done);
            block_fibers = nullptr;
            throw std::runtime_error(what);
          }
        }
      }
    }
    running_kernel = nullptr;
    block_fibers = nullptr;
  }

  /// Runs @p f to its next barrier, warp-level call or end (if it can run).
  void run_fiber(Fiber& f) {
    if (f.state != State::kRunning) return;
    current = &f;
    threadIdx = f.id;
    to_fiber(f);
    if (!thread_error.empty()) {
      running_kernel = nullptr;
      block_fibers = nullptr;
      throw std::runtime_error("emulate: " + thread_error);
    }
  }

  /// Releases the lanes of warp @p w waiting at a warp-level call whose every named lane that has
  /// not exited waits there too (with the same mask), as a GPU's *_sync intrinsics require.
  static bool release_warp(std::vector<Fiber>& fibers, unsigned w, unsigned n) {
    bool released = false;
    for (unsigned i = w * 32; i < n && i < w * 32 + 32; ++i) {
      Fiber& f = fibers[i];
      if (f.state != State::kAtWarpSync) continue;
      bool all_here = true;
      for (unsigned k = 0; k < 32; ++k) {
        const unsigned j = w * 32 + k;
        if (!((f.mask >> k) & 1u) || j >= n || fibers[j].state == State::kDone) continue;
        all_here = all_here && fibers[j].state == State::kAtWarpSync && fibers[j].mask == f.mask;
      }
      if (!all_here) continue;
      for (unsigned k = 0; k < 32; ++k) {
        const unsigned j = w * 32 + k;
        if (((f.mask >> k) & 1u) && j < n && fibers[j].state == State::kAtWarpSync) fibers[j].state = State::kRunning;
      }
      released = true;
    }
    return released;
  }
};

}  // namespace emu

inline void __syncthreads() { emu::barrier(); }

inline constexpr int warpSize = 32;

/// The device math functions that have no C library twin (expf, logf, fmaxf, sqrtf do).
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
/// CUDA's min and max, callable in device code without a namespace (float ones as fminf and
/// fmaxf, so that no float is ever truncated through an int overload).
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

namespace emu {
inline unsigned long long warp_values[32][32];  // [warp][lane]: the values a shuffle publishes

/// A shuffle: every lane named in @p mask that has not exited must call it (the calling lane
/// included); lane `source(lane)` gives this lane its value, or this lane keeps its own when
/// @p source returns a lane outside [0, width) of its segment. A mask that leaves out the calling
/// lane, or a source lane outside the mask, is an error the launch reports.
template <class T, class Source>
T shuffle(const char* name, unsigned mask, T v, int width, Source source) {
  static_assert(sizeof(T) <= sizeof(unsigned long long), "emulate: shuffles of up to 8 bytes");
  const unsigned t = linear_thread(), warp = t / 32, lane = t % 32;
  if (!((mask >> lane) & 1u)) {
    char what[160];
    std::snprintf(what, sizeof what, "lane %u calls %s with mask 0x%08x, which leaves it out", lane, name, mask);
    fail_here(what);
  }
  std::memcpy(&warp_values[warp][lane], &v, sizeof(T));
  current->mask = mask;
  warp_sync();  // every lane of the mask has published its value
  T out = v;
  const int segment = static_cast<int>(lane) / width * width;
  const int from = source(static_cast<int>(lane) - segment);
  if (from >= 0 && from < width) {
    const unsigned src = static_cast<unsigned>(segment + from);
    if (!((mask >> src) & 1u)) {
      char what[160];
      std::snprintf(what, sizeof what, "lane %u reads lane %u in %s, which is not in its mask 0x%08x", lane, src, name, mask);
      fail_here(what);
    }
    std::memcpy(&out, &warp_values[warp][src], sizeof(T));
  }
  warp_sync();  // every lane has read before any writes again
  return out;
}
}  // namespace emu

namespace emu {
inline unsigned char warp_blobs[32][32][96];  // [warp][lane]: what a warp-wide operation publishes

/// A warp-wide operation (mma, ldmatrix, wmma::mma_sync): every one of the 32 lanes of the calling
/// warp must call it. Each lane publishes @p bytes (≤ 96) of @p mine; on return @p all holds the
/// 32 lanes' bytes in lane order. A warp with a lane missing (it exited, or the block's size is
/// not a multiple of 32) is an error the launch reports, as the `.aligned` instructions require.
inline void warp_gather(const char* name, const void* mine, std::size_t bytes, void* all) {
  const unsigned t = linear_thread(), warp = t / 32, lane = t % 32;
  const unsigned n = blockDim.x * blockDim.y * blockDim.z;
  auto missing = [&] {
    char what[200];
    std::snprintf(what, sizeof what, "%s is warp-wide: all 32 lanes of warp %u must call it, and some %s", name, warp,
                  n < (warp + 1) * 32 ? "do not exist (the block's size is not a multiple of 32)" : "have exited or did not call it");
    fail_here(what);
  };
  if (n < (warp + 1) * 32) missing();
  std::memcpy(warp_blobs[warp][lane], mine, bytes);
  current->mask = 0xffffffffu;
  warp_sync();  // every lane that has not exited has published
  for (unsigned k = 0; k < 32; ++k) {
    if ((*block_fibers)[warp * 32 + k].state == State::kDone) missing();
  }
  for (unsigned k = 0; k < 32; ++k) std::memcpy(static_cast<unsigned char*>(all) + k * bytes, warp_blobs[warp][k], bytes);
  warp_sync();  // every lane has read before any publishes again
}
}  // namespace emu

/// v from lane (lane + delta) of this warp's segment, or this lane's own v past its end.
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return emu::shuffle("__shfl_down_sync", mask, v, width, [&](int l) { return l + static_cast<int>(delta); });
}
/// v from lane (lane - delta), or this lane's own v before the segment's start.
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return emu::shuffle("__shfl_up_sync", mask, v, width, [&](int l) { return l - static_cast<int>(delta); });
}
/// v from lane (lane XOR lane_mask).
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return emu::shuffle("__shfl_xor_sync", mask, v, width, [&](int l) { return l ^ lane_mask; });
}
/// v from lane src_lane (mod width) of this segment.
template <class T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
  return emu::shuffle("__shfl_sync", mask, v, width, [&](int) { return ((src_lane % width) + width) % width; });
}
/// Waits for the lanes of @p mask.
inline void __syncwarp(unsigned mask = 0xffffffffu) { (void)emu::shuffle("__syncwarp", mask, 0, 32, [](int l) { return l; }); }

/// Threads never run at the same time here, so an atomic is a plain read-modify-write.
template <class T>
T atomicAdd(T* address, T value) {
  const T old = *address;
  *address = old + value;
  return old;
}

// ---------------------------------------------------------------------------------------------
// The runtime API the labs, libgpulab and the tests use, on host memory: one emulated device,
// small (64 MiB free) so that tests choose small problems, with H200-like attributes otherwise.
// ---------------------------------------------------------------------------------------------
enum cudaError_t {
  cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2, cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100, cudaErrorInvalidDevice = 101, cudaErrorNotSupported = 801, cudaErrorIllegalAddress = 700,
  cudaErrorLaunchTimeout = 702, cudaErrorHardwareStackError = 714, cudaErrorIllegalInstruction = 715,
  cudaErrorMisalignedAddress = 716, cudaErrorInvalidAddressSpace = 717, cudaErrorInvalidPc = 718,
  cudaErrorLaunchFailure = 719, cudaErrorAssert = 710, cudaErrorStreamCaptureInvalidated = 901
};
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice, cudaMemcpyDefault };
enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1, cudaDevAttrMaxGridDimX = 5, cudaDevAttrMaxGridDimY = 6, cudaDevAttrMaxGridDimZ = 7,
  cudaDevAttrWarpSize = 10, cudaDevAttrClockRate = 13, cudaDevAttrMultiProcessorCount = 16, cudaDevAttrMemoryClockRate = 36,
  cudaDevAttrGlobalMemoryBusWidth = 37, cudaDevAttrL2CacheSize = 38, cudaDevAttrMaxThreadsPerMultiProcessor = 39,
  cudaDevAttrComputeCapabilityMajor = 75, cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81, cudaDevAttrMaxRegistersPerMultiprocessor = 82,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
};
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed };
enum cudaGraphNodeType { cudaGraphNodeTypeKernel = 0, cudaGraphNodeTypeMemset = 2, cudaGraphNodeTypeMemAlloc = 10, cudaGraphNodeTypeMemFree = 11 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
inline constexpr unsigned cudaStreamNonBlocking = 1;
struct cudaUUID_t { char bytes[16]; };
struct cudaDeviceProp {
  char name[256];
  cudaUUID_t uuid;
  std::size_t totalGlobalMem;
};
struct cudaFuncAttributes {
  std::size_t sharedSizeBytes, constSizeBytes, localSizeBytes;
  int maxThreadsPerBlock, numRegs, ptxVersion, binaryVersion;
};
struct cudaKernelNodeParams {
  void* func;
  dim3 gridDim, blockDim;
  unsigned sharedMemBytes;
  void** kernelParams;
  void** extra;
};
using cudaEvent_t = std::chrono::steady_clock::time_point*;

namespace emu {
inline constexpr int kEmulatedSMs = 4;  // small, so that grid-capped loops really loop
inline constexpr std::size_t kEmulatedFreeBytes = std::size_t{64} << 20;
struct GraphNode { cudaGraphNodeType type; cudaKernelNodeParams kernel; };
struct Graph { std::vector<GraphNode> nodes; };
struct Stream { Graph* capture = nullptr; };
inline Stream* capturing(cudaStream_t s) { return s != nullptr && static_cast<Stream*>(s)->capture ? static_cast<Stream*>(s) : nullptr; }
/// Static shared memory per kernel, registered by the emulator transform (tools/gpulab/author/emu_transform.cpp) from the declarations.
inline std::vector<std::pair<const void*, std::size_t>>& static_shared_table() {
  static std::vector<std::pair<const void*, std::size_t>> t;
  return t;
}
struct SharedRegistration {
  SharedRegistration(const void* kernel, std::size_t bytes) { static_shared_table().push_back({kernel, bytes}); }
};
}  // namespace emu
using cudaGraph_t = emu::Graph*;
using cudaGraphNode_t = emu::GraphNode*;

inline const char* cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorEmulated"; }
inline const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "an error in the emulated runtime"; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaPeekAtLastError() { return cudaSuccess; }
inline cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
inline cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
  switch (a) {
    case cudaDevAttrMaxThreadsPerBlock: *v = 1024; break;
    case cudaDevAttrMaxGridDimX: *v = 2147483647; break;
    case cudaDevAttrMaxGridDimY: case cudaDevAttrMaxGridDimZ: *v = 65535; break;
    case cudaDevAttrWarpSize: *v = 32; break;
    case cudaDevAttrClockRate: *v = 1980000; break;
    case cudaDevAttrMultiProcessorCount: *v = emu::kEmulatedSMs; break;
    case cudaDevAttrMemoryClockRate: *v = 2619000; break;
    case cudaDevAttrGlobalMemoryBusWidth: *v = 6144; break;
    case cudaDevAttrL2CacheSize: *v = 1 << 20; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *v = 2048; break;
    case cudaDevAttrComputeCapabilityMajor: *v = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *v = 0; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *v = 233472; break;
    case cudaDevAttrMaxRegistersPerMultiprocessor: *v = 65536; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = 232448; break;
    default: return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  std::memset(p, 0, sizeof *p);
  std::strcpy(p->name, "gpulab CPU emulator");
  for (int i = 0; i < 16; ++i) p->uuid.bytes[i] = static_cast<char>(0xE0 + i);
  p->totalGlobalMem = emu::kEmulatedFreeBytes;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceGetPCIBusId(char*, int, int) { return cudaErrorNotSupported; }  // no NVML here
inline cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total) {
  *free_bytes = *total = emu::kEmulatedFreeBytes;
  return cudaSuccess;
}
namespace emu {
/// GPULAB_GUARD_TIGHT (the emulator's second run): every allocation ends against an inaccessible
/// page, so a read or write just past its end faults (see on_fault). Otherwise allocations start
/// 256-byte aligned, as cudaMalloc's do.
inline int tight_setting = -1;  // -1: not yet read from the environment
inline bool tight_allocations() {
  if (tight_setting < 0) {
    const char* v = std::getenv("GPULAB_GUARD_TIGHT");
    tight_setting = v != nullptr && *v != '\0' && *v != '0' ? 1 : 0;
  }
  return tight_setting == 1;
}
/// For the emulator's own tests: allocations from now on end at an inaccessible page (or not).
inline void set_tight_allocations(bool tight) { tight_setting = tight ? 1 : 0; }
inline std::map<void*, std::pair<void*, std::size_t>>& mappings() {  // pointer → (mapping, length)
  static std::map<void*, std::pair<void*, std::size_t>> m;
  return m;
}
inline void* allocate(std::size_t n) {
  if (!tight_allocations()) return std::aligned_alloc(256, (n + 255) / 256 * 256 + 256);
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t length = (n + page - 1) / page * page + page;
  void* map = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return nullptr;
  char* end = static_cast<char*>(map) + length - page;
  mprotect(end, page, PROT_NONE);
  void* p = end - n;
  mappings()[p] = {map, length};
  return p;
}
inline void release(void* p) {
  const auto it = mappings().find(p);
  if (it == mappings().end()) {
    std::free(p);
    return;
  }
  munmap(it->second.first, it->second.second);
  mappings().erase(it);
}
}  // namespace emu

template <class T>
cudaError_t cudaMalloc(T** p, std::size_t n) {
  *p = static_cast<T*>(emu::allocate(n));
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFree(void* p) {
  if (p != nullptr) emu::release(p);
  return cudaSuccess;
}
/// Stream-ordered allocation: kernels run at launch here, so the order is the call order. Inside a
/// capture (where kernels are recorded, not run) the nodes are recorded and nothing is freed.
template <class T>
cudaError_t cudaMallocAsync(T** p, std::size_t n, cudaStream_t s) {
  if (emu::Stream* c = emu::capturing(s)) c->capture->nodes.push_back({cudaGraphNodeTypeMemAlloc, {}});
  return cudaMalloc(p, n);
}
inline cudaError_t cudaFreeAsync(void* p, cudaStream_t s) {
  if (emu::Stream* c = emu::capturing(s)) {
    c->capture->nodes.push_back({cudaGraphNodeTypeMemFree, {}});
    return cudaSuccess;
  }
  return cudaFree(p);
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t n, cudaMemcpyKind) { if (n) std::memmove(dst, src, n); return cudaSuccess; }
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t n, cudaMemcpyKind k, cudaStream_t = nullptr) { return cudaMemcpy(dst, src, n, k); }
inline cudaError_t cudaMemset(void* p, int v, std::size_t n) { if (n) std::memset(p, v, n); return cudaSuccess; }
inline cudaError_t cudaMemsetAsync(void* p, int v, std::size_t n, cudaStream_t s = nullptr) {
  if (emu::Stream* c = emu::capturing(s)) {
    c->capture->nodes.push_back({cudaGraphNodeTypeMemset, {}});
    return cudaSuccess;
  }
  return cudaMemset(p, v, n);
}
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) { *s = new emu::Stream; return cudaSuccess; }
inline cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, 0); }
inline cudaError_t cudaStreamDestroy(cudaStream_t s) { delete static_cast<emu::Stream*>(s); return cudaSuccess; }
inline cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
  if (s == nullptr) return cudaErrorInvalidValue;
  static_cast<emu::Stream*>(s)->capture = new emu::Graph;
  return cudaSuccess;
}
inline cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* g) {
  *g = static_cast<emu::Stream*>(s)->capture;
  static_cast<emu::Stream*>(s)->capture = nullptr;
  return *g ? cudaSuccess : cudaErrorInvalidValue;
}
inline cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t* nodes, std::size_t* n) {
  if (nodes == nullptr) {
    *n = g->nodes.size();
    return cudaSuccess;
  }
  for (std::size_t i = 0; i < *n && i < g->nodes.size(); ++i) nodes[i] = &g->nodes[i];
  return cudaSuccess;
}
inline cudaError_t cudaGraphNodeGetType(cudaGraphNode_t n, cudaGraphNodeType* t) { *t = n->type; return cudaSuccess; }
inline cudaError_t cudaGraphKernelNodeGetParams(cudaGraphNode_t n, cudaKernelNodeParams* p) { *p = n->kernel; return cudaSuccess; }
inline cudaError_t cudaGraphDestroy(cudaGraph_t g) { delete g; return cudaSuccess; }
inline cudaError_t cudaEventCreate(cudaEvent_t* e) { *e = new std::chrono::steady_clock::time_point(); return cudaSuccess; }
inline cudaError_t cudaEventDestroy(cudaEvent_t e) { delete e; return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = nullptr) { *e = std::chrono::steady_clock::now(); return cudaSuccess; }
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  *ms = std::chrono::duration<float, std::milli>(*b - *a).count();
  return cudaSuccess;
}
/// Registers and local memory are unknown here (0); static shared memory comes from the
/// declarations (tools/gpulab/author/emu_transform.cpp).
inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, const void* kernel) {
  std::memset(a, 0, sizeof *a);
  a->maxThreadsPerBlock = 1024;
  for (const auto& [k, bytes] : emu::static_shared_table()) {
    if (k == kernel) a->sharedSizeBytes += bytes;
  }
  return cudaSuccess;
}
template <class F>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, F* kernel) { return cudaFuncGetAttributes(a, reinterpret_cast<const void*>(kernel)); }
template <class F>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, F* kernel, int threads, std::size_t smem);
inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void*, int threads, std::size_t) {
  *blocks = threads > 0 ? std::min(32, 2048 / threads) : 0;
  return cudaSuccess;
}
template <class F>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, F* kernel, int threads, std::size_t smem) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, reinterpret_cast<const void*>(kernel), threads, smem);
}
inline cudaError_t cudaFuncGetName(const char** name, const void* kernel) {
  Dl_info info{};
  *name = dladdr(kernel, &info) != 0 && info.dli_sname ? info.dli_sname : "?";
  return cudaSuccess;
}
inline cudaError_t cudaFuncSetAttribute(const void* kernel, cudaFuncAttribute attribute, int value) {
  if (attribute == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || value > 232448) return cudaErrorInvalidValue;
    emu::dynamic_smem_limits().push_back({kernel, static_cast<std::size_t>(value)});
  }
  return cudaSuccess;
}
template <class F>
cudaError_t cudaFuncSetAttribute(F* kernel, cudaFuncAttribute attribute, int value) {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attribute, value);
}
inline std::size_t emu::static_shared_of(const void* kernel) {
  std::size_t bytes = 0;
  for (const auto& [k, b] : static_shared_table()) {
    if (k == kernel) bytes += b;
  }
  return bytes;
}

inline bool emu::record_if_capturing(cudaStream_t stream, const void* kernel, dim3 grid, dim3 block, std::size_t smem) {
  Stream* c = capturing(stream);
  if (c == nullptr) return false;
  cudaKernelNodeParams p{};
  p.func = const_cast<void*>(kernel);
  p.gridDim = grid;
  p.blockDim = block;
  p.sharedMemBytes = static_cast<unsigned>(smem);
  c->capture->nodes.push_back({cudaGraphNodeTypeKernel, p});
  return true;
}
