// The CPU backends: the kernels of kernels/cpu on host memory ("cpu"), and the same kernels
// behind explicit copies ("cpu-staged"), so the device code path runs without a device.
#include "kernels/backend.h"
#include "kernels/base/check.h"
#include "kernels/cpu/staging.h"

#include "kernels/base/spk_assert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *host_alloc(size_t bytes) {
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p) spk_die(SPK_EXIT_FAILURE, "out of memory allocating %zu bytes for model buffers", bytes);
    return p;
}

static void host_copy(void *dst, const void *src, size_t bytes) {
    if (bytes && dst != src) memcpy(dst, src, bytes);
}

static void host_sync(void) {}

#define SPK_CPU_OP(name) .name = name,
// The two differ only in whether models must treat the buffers as memory of their own.
#define SPK_CPU_BACKEND(label, separate, create)                                                            \
    {                                                                                                       \
        .name = label, .separate_memory = separate, .bn_fixed_order = 1, .alloc = host_alloc, .free = free, \
        .upload = host_copy, .download = host_copy, .sync = host_sync, .staging_create = create,            \
        SPK_STAGING_MEMBERS(spk_cpu_staging), SPK_BACKEND_OPS(SPK_CPU_OP)                                   \
    }

const spk_backend_t spk_backend_cpu = SPK_CPU_BACKEND("cpu", 0, spk_cpu_staging_create);
const spk_backend_t spk_backend_cpu_staged = SPK_CPU_BACKEND("cpu-staged", 1, spk_cpu_staging_create_separate);

// The twins are made on first use (from the thread that builds the models).
#define SPK_CPU_REPLACE(name, replacement) twin.name = replacement;
static const spk_backend_t *cpu_twin(const spk_backend_t *base, spk_backend_t *slot) {
    if (!slot->invariant) {
        spk_backend_t twin = *base;
        twin.invariant = 1;
        SPK_INVARIANT_OPS(SPK_CPU_REPLACE)
        *slot = twin;
    }
    return slot;
}

const spk_backend_t *spk_backend_cpu_invariant(const spk_backend_t *be) {
    static spk_backend_t cpu, staged;
    SPK_ASSERT(be == &spk_backend_cpu || be == &spk_backend_cpu_staged);
    return cpu_twin(be, be == &spk_backend_cpu ? &cpu : &staged);
}
