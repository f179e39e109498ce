#include "device_memory.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>

#include "config.h"
#include "diag.h"
#include "pinned_memory.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define SPK_EMU_ASAN 1
#endif

namespace spk_emu {
namespace {

const size_t kArenaBytes = (size_t)64 << 30;  // also what cudaMemGetInfo reports as total
const size_t kAlign = 256;                    // cudaMalloc's alignment
const size_t kRedzone = 256;
const unsigned char kPoison = 0xFF;

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

struct Arena {
    char* base = nullptr;
    int pkey = -1;                         // the arena's protection key, where the CPU and kernel have them
    size_t high_water = 0;                 // bytes ever handed out, from base
    std::map<size_t, size_t> free_blocks;  // offset -> bytes, beyond high_water excluded
    std::map<uintptr_t, Allocation> live;  // base address -> allocation
    size_t in_use = 0;
    uint64_t serial = 0;
    int access_depth = 0;  // with mprotect: across threads, as the protection is the process's
    struct sigaction previous_segv;
    bool handler_installed = false;
};
Arena g_arena;
// With a protection key the access right is each thread's own (the PKRU register), so the
// depth is too: a host thread touching device memory faults while another runs device work.
__thread int t_access_depth;

int& access_depth() { return g_arena.pkey >= 0 ? t_access_depth : g_arena.access_depth; }

void set_protection(size_t from, size_t bytes, bool accessible) {
    if (!config().protect || g_arena.pkey >= 0 || bytes == 0) return;
    if (mprotect(g_arena.base + from, bytes, accessible ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
        fail("mprotect of device memory failed: %s", strerror(errno));
}

void describe_address(const void* p, char* out, size_t cap) {
    const uintptr_t a = (uintptr_t)p;
    auto it = g_arena.live.upper_bound(a);
    if (it != g_arena.live.begin()) {
        const Allocation& al = std::prev(it)->second;
        if (a < al.base + round_up(al.bytes, kAlign) + kRedzone) {
            snprintf(out, cap, "%zu bytes into the %zu-byte allocation #%llu", (size_t)(a - al.base), al.bytes,
                     (unsigned long long)al.serial);
            return;
        }
    }
    snprintf(out, cap, "not inside any live allocation");
}

void on_segv(int sig, siginfo_t* info, void* ctx) {
    char msg[600];
    int n = 0;
    if (in_arena(info->si_addr) && access_depth() == 0) {
        char where[160];
        describe_address(info->si_addr, where, sizeof where);
        n = snprintf(msg, sizeof msg,
                     "cuda-emu: error: host code accessed device memory at %p (%s); on a GPU "
                     "this is an invalid access too: copy it with cudaMemcpy first\n",
                     info->si_addr, where);
    } else if (pinned_fault_message(info->si_addr, msg, sizeof msg)) {
        n = (int)strlen(msg);
    }
    if (n > 0) {
        (void)!write(2, msg, (size_t)n);
        signal(SIGABRT, SIG_DFL);
        abort();
    }
    const struct sigaction& prev = g_arena.previous_segv;
    if (prev.sa_flags & SA_SIGINFO) {
        prev.sa_sigaction(sig, info, ctx);
        return;
    }
    if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
        prev.sa_handler(sig);
        return;
    }
    signal(sig, SIG_DFL);  // returning re-runs the access, which now ends the process
}

// Protection: with a memory protection key (x86-64 PKU), the arena is mapped readable and
// writable once under its own key, and device work switches the thread's right to it on and off
// with one unprivileged instruction (WRPKRU). Without one (older CPUs and kernels, aarch64,
// valgrind), mprotect changes the mapping itself around each device operation, which costs a
// system call and a TLB flush over every page used so far: 30 s of a CAM++ test's 37.
void reserve_arena() {
    void* p = mmap(nullptr, kArenaBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        fail("cannot reserve %zu GiB of address space for device memory: %s", kArenaBytes >> 30, strerror(errno));
    g_arena.base = static_cast<char*>(p);
    if (!config().protect) {
        if (mprotect(p, kArenaBytes, PROT_READ | PROT_WRITE) != 0) fail("mprotect failed: %s", strerror(errno));
        return;
    }
    if (config().pkeys) {
        // Denied to this thread from here on; threads it starts later inherit that, and threads
        // started before have the kernel's default rights, which deny every key but the first.
        const int key = pkey_alloc(0, PKEY_DISABLE_ACCESS);
        if (key >= 0 && pkey_mprotect(p, kArenaBytes, PROT_READ | PROT_WRITE, key) == 0)
            g_arena.pkey = key;
        else if (key >= 0)
            pkey_free(key);
    }
    install_fault_handler();
}

// First fit among freed blocks, else from the high-water mark.
size_t take_block(size_t span) {
    for (auto it = g_arena.free_blocks.begin(); it != g_arena.free_blocks.end(); ++it) {
        if (it->second < span) continue;
        const size_t off = it->first, left = it->second - span;
        g_arena.free_blocks.erase(it);
        if (left) g_arena.free_blocks[off + span] = left;
        return off;
    }
    if (span > kArenaBytes - g_arena.high_water) return SIZE_MAX;
    const size_t off = g_arena.high_water;
    g_arena.high_water += span;
    if (access_depth() > 0) set_protection(off, span, true);
    return off;
}

void give_back(size_t off, size_t span) {
    auto next = g_arena.free_blocks.lower_bound(off);
    if (next != g_arena.free_blocks.end() && off + span == next->first) {
        span += next->second;
        next = g_arena.free_blocks.erase(next);
    }
    if (next != g_arena.free_blocks.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == off) {
            prev->second += span;
            return;
        }
    }
    g_arena.free_blocks[off] = span;
}

}  // namespace

void install_fault_handler() {
    if (!config().protect || g_arena.handler_installed) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_arena.previous_segv);
    g_arena.handler_installed = true;
}

void* device_alloc(size_t bytes, int device) {
    if (!g_arena.base) reserve_arena();
    const size_t body = round_up(bytes, kAlign), span = body + kRedzone;
    const size_t off = take_block(span);
    if (off == SIZE_MAX) return nullptr;
    char* p = g_arena.base + off;
    Allocation a{(uintptr_t)p, bytes, device, ++g_arena.serial};
    g_arena.live[a.base] = a;
    g_arena.in_use += bytes;
    DeviceAccess access;
#ifdef SPK_EMU_ASAN
    ASAN_UNPOISON_MEMORY_REGION(p, span);
#endif
    memset(p, kPoison, span);  // fresh device memory holds garbage; the redzone a known pattern
#ifdef SPK_EMU_ASAN
    ASAN_POISON_MEMORY_REGION(p + bytes, span - bytes);
#endif
    return p;
}

bool device_free(void* p) {
    auto it = g_arena.live.find((uintptr_t)p);
    if (it == g_arena.live.end()) return false;
    const Allocation a = it->second;
    check_redzone(a, "cudaFree");
    const size_t span = round_up(a.bytes, kAlign) + kRedzone;
    {
        DeviceAccess access;
#ifdef SPK_EMU_ASAN
        ASAN_UNPOISON_MEMORY_REGION(p, span);
#endif
        memset(p, kPoison, span);
#ifdef SPK_EMU_ASAN
        ASAN_POISON_MEMORY_REGION(p, span);  // a kernel still reading it is reported
#endif
    }
    g_arena.live.erase(it);
    g_arena.in_use -= a.bytes;
    give_back((size_t)((char*)p - g_arena.base), span);
    return true;
}

void device_discard(void* p, size_t bytes) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t from = ((uintptr_t)p + page - 1) & ~(page - 1), to = ((uintptr_t)p + bytes) & ~(page - 1);
    if (to > from) madvise((void*)from, to - from, MADV_DONTNEED);
}

size_t device_bytes_in_use() { return g_arena.in_use; }
size_t device_bytes_total() { return kArenaBytes; }

bool in_arena(const void* p) {
    const char* c = static_cast<const char*>(p);
    return g_arena.base && c >= g_arena.base && c < g_arena.base + kArenaBytes;
}

const Allocation* find_allocation(const void* p) {
    const uintptr_t a = (uintptr_t)p;
    auto it = g_arena.live.upper_bound(a);
    if (it == g_arena.live.begin()) return nullptr;
    const Allocation& al = std::prev(it)->second;
    return a < al.base + al.bytes ? &al : nullptr;
}

const Allocation* find_range(const void* p, size_t bytes, char* why, size_t cap) {
    if (!in_arena(p)) {
        snprintf(why, cap, "%p is host memory, not device memory", p);
        return nullptr;
    }
    const uintptr_t a = (uintptr_t)p;
    auto it = g_arena.live.upper_bound(a);
    const Allocation* al = it == g_arena.live.begin() ? nullptr : &std::prev(it)->second;
    if (!al || a >= al->base + round_up(al->bytes, kAlign) + kRedzone) {
        snprintf(why, cap, "%p is device memory that is not allocated (freed?)", p);
        return nullptr;
    }
    if (a + bytes > al->base + al->bytes) {
        snprintf(why, cap, "[%p, +%zu bytes) runs %zu bytes past the end of the %zu-byte allocation #%llu", p, bytes,
                 (size_t)(a + bytes - (al->base + al->bytes)), al->bytes, (unsigned long long)al->serial);
        return nullptr;
    }
    return al;
}

const Allocation& require_range(const void* p, size_t bytes, const char* what) {
    char why[256];
    const Allocation* a = find_range(p, bytes, why, sizeof why);
    if (!a) fail("%s: %s", what, why);
    return *a;
}

void check_redzone(const Allocation& a, const char* after) {
#ifndef SPK_EMU_ASAN  // AddressSanitizer reports such writes itself, at the write
    const unsigned char* z = reinterpret_cast<const unsigned char*>(a.base + a.bytes);
    const size_t n = round_up(a.bytes, kAlign) + kRedzone - a.bytes;
    DeviceAccess access;
    for (size_t i = 0; i < n; i++)
        if (z[i] != kPoison)
            fail("%s: device work wrote past the end of the %zu-byte allocation #%llu (at end + %zu)", after, a.bytes,
                 (unsigned long long)a.serial, i);
#else
    (void)a, (void)after;
#endif
}

namespace {
// Every page handed out so far, for this thread (a key) or the process (mprotect).
void set_access(bool accessible) {
    if (g_arena.pkey >= 0)
        pkey_set(g_arena.pkey, accessible ? 0 : PKEY_DISABLE_ACCESS);
    else
        set_protection(0, g_arena.high_water, accessible);
}
}  // namespace

// The arena is reserved first, so the protection's kind (and the depth counted) cannot change
// between here and the destructor, as it would if device work allocated the first block.
DeviceAccess::DeviceAccess() {
    if (!g_arena.base) reserve_arena();
    if (access_depth()++ == 0) set_access(true);
}

DeviceAccess::~DeviceAccess() {
    if (--access_depth() == 0) set_access(false);
}

}  // namespace spk_emu
