#include "fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "diag.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define SPK_EMU_ASAN 1
#endif

#ifndef SPK_EMU_USE_UCONTEXT
// spk_emu_context_switch(void** save_sp, void* next_sp): pushes the callee-saved registers on
// the current stack, stores the stack pointer in *save_sp, loads next_sp and pops the same
// frame from there. A new fiber's frame "returns" into spk_emu_fiber_start, which calls
// entry(arg) from two of the restored registers. The floating-point control state (rounding,
// flush-to-zero) is the host thread's for every fiber: kernels do not change it. It resumes
// with a jump, not `ret`: a ret to another stack than the call's is mispredicted every time
// (the return-stack predictor), which made switching three times slower.
extern "C" void spk_emu_context_switch(void** save_sp, void* next_sp);
extern "C" void spk_emu_fiber_start();
#if defined(__x86_64__)
asm(R"(
    .pushsection .text
    .globl spk_emu_context_switch
    .hidden spk_emu_context_switch
    .type spk_emu_context_switch, @function
spk_emu_context_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    popq %rcx
    jmpq *%rcx
    .size spk_emu_context_switch, .-spk_emu_context_switch

    .globl spk_emu_fiber_start
    .hidden spk_emu_fiber_start
    .type spk_emu_fiber_start, @function
spk_emu_fiber_start:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size spk_emu_fiber_start, .-spk_emu_fiber_start
    .popsection
)");
#elif defined(__aarch64__)
asm(R"(
    .pushsection .text
    .globl spk_emu_context_switch
    .hidden spk_emu_context_switch
    .type spk_emu_context_switch, %function
spk_emu_context_switch:
    sub sp, sp, #160
    stp x19, x20, [sp, #0]
    stp x21, x22, [sp, #16]
    stp x23, x24, [sp, #32]
    stp x25, x26, [sp, #48]
    stp x27, x28, [sp, #64]
    stp x29, x30, [sp, #80]
    stp d8, d9, [sp, #96]
    stp d10, d11, [sp, #112]
    stp d12, d13, [sp, #128]
    stp d14, d15, [sp, #144]
    mov x9, sp
    str x9, [x0]
    mov sp, x1
    ldp x19, x20, [sp, #0]
    ldp x21, x22, [sp, #16]
    ldp x23, x24, [sp, #32]
    ldp x25, x26, [sp, #48]
    ldp x27, x28, [sp, #64]
    ldp x29, x30, [sp, #80]
    ldp d8, d9, [sp, #96]
    ldp d10, d11, [sp, #112]
    ldp d12, d13, [sp, #128]
    ldp d14, d15, [sp, #144]
    add sp, sp, #160
    br x30
    .size spk_emu_context_switch, .-spk_emu_context_switch

    .globl spk_emu_fiber_start
    .hidden spk_emu_fiber_start
    .type spk_emu_fiber_start, %function
spk_emu_fiber_start:
    mov x0, x19
    blr x20
    brk #0
    .size spk_emu_fiber_start, .-spk_emu_fiber_start
    .popsection
)");
#endif
#endif  // !SPK_EMU_USE_UCONTEXT

namespace spk_emu {

char* fiber_stack_alloc(size_t bytes) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void* p = mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) fail("cannot allocate a %zu-byte thread stack: %s", bytes, strerror(errno));
    mprotect(p, page, PROT_NONE);  // the guard: stacks grow down into it
    return static_cast<char*>(p) + page;
}

size_t fiber_stack_bytes() {
#ifdef SPK_EMU_ASAN
    return (size_t)512 << 10;
#else
    return (size_t)64 << 10;
#endif
}

#ifdef SPK_EMU_USE_UCONTEXT
namespace {
struct Start {
    void (*entry)(void*);
    void* arg;
};
void ucontext_start(unsigned hi, unsigned lo) {
    Start* s = reinterpret_cast<Start*>(((uintptr_t)hi << 32) | lo);
    s->entry(s->arg);
}
}  // namespace

void fiber_init(FiberContext& c, char* stack, size_t bytes, void (*entry)(void*), void* arg) {
    Start* s = reinterpret_cast<Start*>(stack);  // kept in the lowest bytes of the stack
    s->entry = entry;
    s->arg = arg;
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = stack + sizeof(Start) * 2;
    c.uc.uc_stack.ss_size = bytes - sizeof(Start) * 2;
    c.uc.uc_link = nullptr;
    const uintptr_t v = (uintptr_t)s;
    makecontext(&c.uc, (void (*)())ucontext_start, 2, (unsigned)(v >> 32), (unsigned)v);
    c.stack_bottom = stack;
    c.stack_bytes = bytes;
}
#else
void fiber_init(FiberContext& c, char* stack, size_t bytes, void (*entry)(void*), void* arg) {
    uintptr_t top = ((uintptr_t)stack + bytes) & ~(uintptr_t)15;
#if defined(__x86_64__)
    // frame: r15 r14 r13 r12 rbx rbp return-address; after the final ret the stack pointer
    // is `top`, 16-byte aligned, as the call in spk_emu_fiber_start needs.
    uint64_t* f = reinterpret_cast<uint64_t*>(top) - 7;
    f[0] = f[1] = 0;
    f[2] = (uintptr_t)entry;  // r13
    f[3] = (uintptr_t)arg;    // r12
    f[4] = f[5] = 0;
    f[6] = (uintptr_t)spk_emu_fiber_start;
#else
    // frame of 160 bytes: x19..x30 (x19 = arg, x20 = entry, x30 = spk_emu_fiber_start), d8..d15.
    uint64_t* f = reinterpret_cast<uint64_t*>(top - 160);
    memset(f, 0, 160);
    f[0] = (uintptr_t)arg;
    f[1] = (uintptr_t)entry;
    f[11] = (uintptr_t)spk_emu_fiber_start;
#endif
    c.sp = f;
    c.stack_bottom = stack;
    c.stack_bytes = bytes;
}
#endif

void fiber_switch(FiberContext& from, FiberContext& to, bool finished) {
#ifdef SPK_EMU_ASAN
    void* fake_stack = nullptr;
    __sanitizer_start_switch_fiber(finished ? nullptr : &fake_stack, to.stack_bottom, to.stack_bytes);
#else
    (void)finished;
#endif
#ifdef SPK_EMU_USE_UCONTEXT
    swapcontext(&from.uc, &to.uc);
#else
    spk_emu_context_switch(&from.sp, to.sp);
#endif
#ifdef SPK_EMU_ASAN
    __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
}

void fiber_started(FiberContext& from) {
#ifdef SPK_EMU_ASAN
    // Learns the bounds of the stack that switched here (the host thread's), which the
    // switches back to it need.
    __sanitizer_finish_switch_fiber(nullptr, &from.stack_bottom, &from.stack_bytes);
#else
    (void)from;
#endif
}

}  // namespace spk_emu
