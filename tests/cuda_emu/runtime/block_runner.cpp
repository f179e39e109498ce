#include "block_runner.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "config.h"
#include "diag.h"
#include "fiber.h"

namespace spk_emu {

ThreadCoords g_coords;

namespace {

struct Thread {
    FiberContext context;
    char* stack = nullptr;
    bool finished = false;
    uint3 index{};
};

// The round in progress: every thread runs until it finishes or reaches a barrier, which must
// be the same for all (the first arrival's).
struct Round {
    unsigned finished = 0, waiting = 0;
    unsigned first_waiter = 0;
    const char* file = nullptr;
    int line = 0;
};

struct Runner {
    FiberContext host;
    std::vector<Thread> threads;
    const KernelBody* body = nullptr;
    const LaunchSite* site = nullptr;
    Thread* current = nullptr;
    Round round;
    unsigned long long block_serial = 0;  // counts every block ever started
    std::vector<unsigned char> dynamic_shared;
    size_t dynamic_bytes = 0;
};
Runner g_runner;

const unsigned char kGarbage = 0xFF;

void thread_main(void* arg) {
    Thread* t = static_cast<Thread*>(arg);
    fiber_started(g_runner.host);
    g_runner.body->run_thread();
    t->finished = true;
    g_runner.round.finished++;
    fiber_switch(t->context, g_runner.host, true);
    abort();  // a finished thread is never resumed
}

uint3 unflatten(unsigned i, dim3 d) { return uint3{i % d.x, (i / d.x) % d.y, i / (d.x * d.y)}; }

const char* block_name(char* buf, size_t cap) {
    const uint3 b = g_coords.block_idx;
    snprintf(buf, cap, "kernel %s (launched at %s:%d), block (%u,%u,%u)", g_runner.site->kernel, g_runner.site->file,
             g_runner.site->line, b.x, b.y, b.z);
    return buf;
}

// After a round: done when every thread finished; an error when some finished and others wait.
bool round_ends_block(unsigned n) {
    const Round& r = g_runner.round;
    if (r.finished == n) return true;
    if (r.finished > 0) {
        char where[256];
        fail(
            "%s: %u of %u threads exited while thread %u waits at __syncthreads (%s:%d); a barrier "
            "must be reached by every thread of the block",
            block_name(where, sizeof where), r.finished, n, r.first_waiter, r.file, r.line);
    }
    return false;
}

void run_block(unsigned n) {
    g_runner.block_serial++;
    if (g_runner.dynamic_bytes) memset(g_runner.dynamic_shared.data(), kGarbage, g_runner.dynamic_bytes);
    const size_t stack_bytes = fiber_stack_bytes();
    for (unsigned i = 0; i < n; i++) {
        Thread& t = g_runner.threads[i];
        if (!t.stack) t.stack = fiber_stack_alloc(stack_bytes);
        // Stacks are a multiple of 4 KiB apart, so their tops would share one set of the L1
        // cache (and few of the L2's), and every switch would miss: each starts 64 bytes lower.
        const size_t color = (size_t)(i % 64) * 64;
        fiber_init(t.context, t.stack, stack_bytes - color, thread_main, &t);
        t.finished = false;
        t.index = unflatten(i, g_coords.block_dim);
    }
    const bool reverse = config().reverse;
    g_runner.round = Round{};
    for (;;) {
        g_runner.round.waiting = 0;
        for (unsigned k = 0; k < n; k++) {
            Thread& t = g_runner.threads[reverse ? n - 1 - k : k];
            if (t.finished) continue;
            g_runner.current = &t;
            g_coords.thread_idx = t.index;
            fiber_switch(g_runner.host, t.context);
        }
        g_runner.current = nullptr;
        if (round_ends_block(n)) return;
    }
}

}  // namespace

void run_grid(const KernelBody& body, const LaunchSite& site, dim3 grid, dim3 block, size_t shared_bytes) {
    if (g_runner.body)
        fail("kernel %s launched from inside kernel %s: dynamic parallelism is not emulated", site.kernel,
             g_runner.site->kernel);
    const unsigned n = block.x * block.y * block.z;
    const unsigned long long blocks = (unsigned long long)grid.x * grid.y * grid.z;
    if (g_runner.threads.size() < n) g_runner.threads.resize(n);
    g_runner.body = &body;
    g_runner.site = &site;
    g_runner.dynamic_bytes = shared_bytes;
    if (g_runner.dynamic_shared.size() < shared_bytes) g_runner.dynamic_shared.resize(shared_bytes);
    g_coords.block_dim = block;
    g_coords.grid_dim = grid;
    const bool reverse = config().reverse;
    for (unsigned long long k = 0; k < blocks; k++) {
        const unsigned long long b = reverse ? blocks - 1 - k : k;
        g_coords.block_idx = uint3{(unsigned)(b % grid.x), (unsigned)(b / grid.x % grid.y),
                                   (unsigned)(b / ((unsigned long long)grid.x * grid.y))};
        run_block(n);
    }
    g_runner.body = nullptr;
    g_runner.site = nullptr;
}

void sync_threads(const char* file, int line) {
    Thread* t = g_runner.current;
    if (!t) fail("__syncthreads() called outside a kernel (%s:%d)", file, line);
    Round& r = g_runner.round;
    const unsigned me = (unsigned)(t - g_runner.threads.data());
    if (r.waiting++ == 0) {
        r.first_waiter = me;
        r.file = file;
        r.line = line;
    } else if (line != r.line || (file != r.file && strcmp(file, r.file) != 0)) {
        char where[256];
        fail("%s: thread %u waits at __syncthreads %s:%d, thread %u at %s:%d: divergent barriers",
             block_name(where, sizeof where), r.first_waiter, r.file, r.line, me, file, line);
    }
    fiber_switch(t->context, g_runner.host);
}

void* dynamic_shared_memory() {
    if (!g_runner.current) fail("dynamic shared memory used outside a kernel");
    return g_runner.dynamic_bytes ? g_runner.dynamic_shared.data() : nullptr;
}

void shared_block_start(void* p, size_t bytes, unsigned long long* block_serial) {
    if (*block_serial == g_runner.block_serial) return;
    *block_serial = g_runner.block_serial;
    memset(p, kGarbage, bytes);
}

}  // namespace spk_emu
