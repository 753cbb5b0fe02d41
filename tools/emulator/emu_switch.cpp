/// @file emu_switch.cpp
/// @brief The emulator's fiber switch on x86-64 Linux (emu.hpp: GPULAB_EMU_FAST_SWITCH).
///
/// gpulab_emu_switch(save, load) pushes the registers the System V ABI has a callee preserve
/// (rbp, rbx, r12 to r15) and the SSE and x87 control words on the running stack, stores the
/// stack pointer in *save, loads @p load as the stack pointer, pops the same from there and
/// returns on that stack. Everything else a caller already assumes lost across a call. A new
/// fiber's stack holds such a frame whose return address is gpulab_emu_fiber_start
/// (emu.hpp: start_fiber), which calls gpulab_emu_fiber_main below on a 16-byte aligned stack.
#include "emu.hpp"

#ifdef GPULAB_EMU_FAST_SWITCH

asm(R"(
    .text
    .p2align 4
    .globl gpulab_emu_switch
    .type gpulab_emu_switch, @function
gpulab_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $16, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $16, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size gpulab_emu_switch, .-gpulab_emu_switch

    .p2align 4
    .globl gpulab_emu_fiber_start
    .type gpulab_emu_fiber_start, @function
gpulab_emu_fiber_start:
    andq $-16, %rsp
    call gpulab_emu_fiber_main
    ud2
    .size gpulab_emu_fiber_start, .-gpulab_emu_fiber_start
)");

/// A thread's whole life: the kernel, then back to the scheduler for good (it never resumes a
/// thread that is done). Anything thrown that is not a std::exception ends the launch too.
extern "C" [[noreturn]] void gpulab_emu_fiber_main() {
  try {
    emu::fiber_entry();
  } catch (...) {
    emu::fail_here("an exception in device code that is not a std::exception");
  }
  emu::to_scheduler();
  std::abort();  // unreachable: a thread that is done is never resumed
}

#endif
