/// @file emu.hpp
/// @brief A tiny cooperative emulator of CUDA thread blocks on the CPU, for checking a kernel's
/// *indexing* where no GPU is available (scripts/emulate-gemm). Not part of the course, not a
/// grade: it runs one block at a time, each thread as a ucontext fiber that runs until its next
/// __syncthreads(), in thread order. So a missing barrier shows as wrong values (a thread reads a
/// tile its neighbours have not written yet), a barrier some threads skip is reported, and every
/// index is exercised; warp-level behaviour, timing, memory models and speed are not emulated.
#pragma once

#include <ucontext.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <vector>

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
using cudaStream_t = void*;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static  // one block runs at a time, so a function-static array is its shared memory
#define __align__(n) __attribute__((aligned(n)))
#define CUDA_CHECK_LAUNCH() ((void)0)

inline dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace emu {

enum class State { kRunning, kAtBarrier, kDone };

struct Fiber {
  ucontext_t context;
  std::unique_ptr<char[]> stack;
  State state = State::kRunning;
  dim3 id;
};

inline constexpr std::size_t kStackBytes = 1 << 16;
inline ucontext_t scheduler;
inline Fiber* current = nullptr;
inline std::function<void()> kernel_call;

inline void fiber_entry() {
  kernel_call();
  current->state = State::kDone;
}

inline void barrier() {
  current->state = State::kAtBarrier;
  swapcontext(&current->context, &scheduler);
}

/// `kernel<<<grid, block, smem, stream>>>(args)` becomes `emu::Launch(grid, block, smem, stream).run(...)`.
struct Launch {
  dim3 grid, block;
  Launch(dim3 g, dim3 b, std::size_t = 0, cudaStream_t = nullptr) : grid(g), block(b) {}

  void run(std::function<void()> call) {
    kernel_call = std::move(call);
    gridDim = grid;
    blockDim = block;
    const unsigned n = block.x * block.y * block.z;
    std::vector<Fiber> fibers(n);
    for (Fiber& f : fibers) f.stack.reset(new char[kStackBytes]);
    for (unsigned bz = 0; bz < grid.z; ++bz) {
      for (unsigned by = 0; by < grid.y; ++by) {
        for (unsigned bx = 0; bx < grid.x; ++bx) {
          blockIdx = dim3(bx, by, bz);
          for (unsigned i = 0; i < n; ++i) {
            Fiber& f = fibers[i];
            f.id = dim3(i % block.x, (i / block.x) % block.y, i / (block.x * block.y));
            f.state = State::kRunning;
            getcontext(&f.context);
            f.context.uc_stack.ss_sp = f.stack.get();
            f.context.uc_stack.ss_size = kStackBytes;
            f.context.uc_link = &scheduler;
            makecontext(&f.context, fiber_entry, 0);
          }
          // Run every thread to its next barrier (or its end), in thread order, until all end.
          for (;;) {
            unsigned done = 0, waiting = 0;
            for (Fiber& f : fibers) {
              if (f.state == State::kDone) {
                ++done;
                continue;
              }
              f.state = State::kRunning;
              current = &f;
              threadIdx = f.id;
              swapcontext(&scheduler, &f.context);
              (f.state == State::kDone ? done : waiting) += 1;
            }
            if (done == n) break;
            if (done > 0 && waiting > 0) {
              std::fprintf(stderr, "emulate: block (%u, %u, %u): %u threads wait at a barrier that %u others never reach\n",
                           bx, by, bz, waiting, done);
              std::exit(2);
            }
          }
        }
      }
    }
  }
};

}  // namespace emu

inline void __syncthreads() { emu::barrier(); }
