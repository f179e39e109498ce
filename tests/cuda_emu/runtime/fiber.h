// Cooperative execution contexts (fibers) for the threads of a block: a hand-written switch of
// the callee-saved registers on x86-64 and aarch64 (a few nanoseconds; a block of 256 threads
// switches hundreds of times per reduction), ucontext elsewhere or with
// SPK_EMU_FIBER_UCONTEXT. Aware of AddressSanitizer's fiber interface.
#pragma once
#include <cstddef>

#if defined(SPK_EMU_FIBER_UCONTEXT) || !(defined(__x86_64__) || defined(__aarch64__))
#define SPK_EMU_USE_UCONTEXT 1
#include <ucontext.h>
#endif

namespace spk_emu {

struct FiberContext {
#ifdef SPK_EMU_USE_UCONTEXT
    ucontext_t uc;
#else
    void* sp = nullptr;
#endif
    const void* stack_bottom = nullptr;  // for AddressSanitizer; null for the host thread's own
    size_t stack_bytes = 0;
};

// A stack of `bytes` (plus a guard page below it that faults on overflow).
char* fiber_stack_alloc(size_t bytes);
size_t fiber_stack_bytes();  // what the block runner uses: more under AddressSanitizer

// Makes `c` start entry(arg) on the given stack at its first switch; entry must never return
// (it switches away for good instead, with `finished` set).
void fiber_init(FiberContext& c, char* stack, size_t bytes, void (*entry)(void*), void* arg);
// Saves the current context into `from` and resumes `to`. `finished`: `from` never resumes.
void fiber_switch(FiberContext& from, FiberContext& to, bool finished = false);
// First thing a new fiber's entry calls (completes the switch for AddressSanitizer).
void fiber_started(FiberContext& from);

}  // namespace spk_emu
