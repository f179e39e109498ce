// A backend: where a model's buffers live and which implementation of the math kernels runs
// on them. Models call every op through this table, so the CPU and the GPU share one model
// code path and the CPU tests exercise it.
//
// Each op member has the type of the CPU function of the same name (kernels/*.h), taken with
// __typeof__, so a sibling with a different parameter list does not compile into the table.
// All pointers an op receives are backend memory (device memory for CUDA), including the
// scalar outputs of the losses and the integer labels; hyperparameters are host values.
#pragma once
#include <stddef.h>

#include "kernels/ops.h"
#include "kernels/staging.h"

#define SPK_BACKEND_OP(name) __typeof__(name) *name;

typedef struct spk_backend {
    const char *name;     // "cpu", "cpu-staged", "cuda"
    int separate_memory;  // buffers are not the host's: inputs are uploaded, results downloaded
    int invariant;        // the world-size-invariant twin (spk_backend_invariant)
    // The default BatchNorm kernels sum in an order fixed by the rows they are given, not by
    // threads or launches: the invariant mode's groups may take them.
    int bn_fixed_order;

    // memory: zero-filled allocation in bytes (aborts with a sentence when out of memory)
    void *(*alloc)(size_t bytes);
    void (*free)(void *p);
    void (*upload)(void *dst, const void *src, size_t bytes);    // host -> backend, blocking
    void (*download)(void *dst, const void *src, size_t bytes);  // backend -> host, blocking
    void (*sync)(void);                                          // queued work is done

    // Staging. staging_begin opens the next slot for up to `bytes` of input (pieces padded to
    // SPK_STAGING_ALIGN), waiting on the host only until the slot's use two batches ago is over;
    // staging_put copies host data into it and returns where the kernels will find it;
    // staging_ready makes the kernels queued from then on see all of it. staging_fetch queues
    // a copy of up to SPK_STAGING_FETCH_BYTES of backend memory, written by the work queued so
    // far, into the open slot; staging_fetched(s, age) waits for the fetch of the slot opened
    // `age` (0 or 1) begins ago, only for it, and returns its host copy. CUDA: pinned host
    // memory, the upload on a stream of its own, ordered by events; CPU: immediate copies
    // (cpu hands out the host data itself).
    spk_staging_t *(*staging_create)(void);
    void (*staging_free)(spk_staging_t *s);
    void (*staging_begin)(spk_staging_t *s, size_t bytes);
    const void *(*staging_put)(spk_staging_t *s, const void *host, size_t bytes);
    void (*staging_ready)(spk_staging_t *s);
    void (*staging_fetch)(spk_staging_t *s, const void *src, size_t bytes);
    const void *(*staging_fetched)(spk_staging_t *s, int age);

    SPK_BACKEND_OPS(SPK_BACKEND_OP)
} spk_backend_t;

// The CPU kernels on host memory.
extern const spk_backend_t spk_backend_cpu;
// The CPU kernels on buffers of their own, reached only through upload/download like device
// memory: runs the GPU path's data movement (and finds a missing copy) on any machine.
extern const spk_backend_t spk_backend_cpu_staged;
// The CUDA kernels on the device spk_cuda_init selected; NULL when built without CUDA
// (kernels/device_none.c).
const spk_backend_t *spk_backend_cuda(void);

// The world-size-invariant mode's twin of a backend: the same memory and the same ops, but for
// those of SPK_INVARIANT_OPS (kernels/ops.h), which it replaces by versions whose result for a
// sample depends neither on the batch size nor on the thread count (models reach it through
// model_t.be; the exact-sum ops that the mode's backward uses are in every table). A twin is
// its own twin (kernels/backend_invariant.c).
const spk_backend_t *spk_backend_invariant(const spk_backend_t *be);
// The backends' own twins, which spk_backend_invariant finds: a CPU backend's (be is
// spk_backend_cpu or spk_backend_cpu_staged), and the CUDA backend's (NULL without CUDA).
const spk_backend_t *spk_backend_cpu_invariant(const spk_backend_t *be);
const spk_backend_t *spk_backend_cuda_invariant(void);

// n exact sums (kernels/exact_sum.h) copied between backend and host memory, part by part (each
// side may be laid out for more sums than n).
static inline void spk_xsum_download(const spk_backend_t *be, xsum_t host, xsum_t src, int64_t n) {
    be->download(host.bin, src.bin, (size_t)n);
    be->download(host.hi, src.hi, (size_t)n * sizeof(int64_t));
    be->download(host.lo, src.lo, (size_t)n * sizeof(int64_t));
}
static inline void spk_xsum_upload(const spk_backend_t *be, xsum_t dst, xsum_t host, int64_t n) {
    be->upload(dst.bin, host.bin, (size_t)n);
    be->upload(dst.hi, host.hi, (size_t)n * sizeof(int64_t));
    be->upload(dst.lo, host.lo, (size_t)n * sizeof(int64_t));
}
