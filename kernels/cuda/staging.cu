// Staging for the CUDA backend (kernels/backend.h): batches go up from pinned host memory on a
// copy stream of its own, results come back into pinned host memory, and events order both
// against the kernels, so nothing waits on the host while a step is queued:
//
//   begin (slot k)  host waits for `copied[k]`, the slot's upload of two batches ago (long done:
//                   the kernels of that batch needed it), then writes the pinned buffer;
//   ready           the copy stream waits for `consumed[k]` (the kernels of the slot's last
//                   batch, recorded when the next slot was opened), uploads, records
//                   `copied[k]`; the kernels' stream waits for it;
//   fetch           a copy into the slot's pinned result area on the kernels' stream, then
//                   `fetched[k]`, which staging_fetched waits for (only it).
#include <string.h>

#include "kernels/base/spk_assert.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/staging.h"

namespace {

struct Slot {
    char *pinned = nullptr;  // (cap) host side of the upload
    char *device = nullptr;  // (cap) device side
    size_t cap = 0, used = 0;
    char *result = nullptr;  // (SPK_STAGING_FETCH_BYTES) pinned, fetched results
    cudaEvent_t copied, consumed, fetched;
};

struct Staging {
    cudaStream_t copy;
    int cur = 1, opened = 0;
    Slot slot[2];
};

Staging *of(spk_staging_t *s) { return reinterpret_cast<Staging *>(s); }

cudaEvent_t new_event() {
    cudaEvent_t e;
    cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
}

// A bigger slot; rare (the first batches, a longer evaluation batch), and cudaFree and
// cudaFreeHost wait for the device, so no queued work still uses the old buffers.
void grow(Slot &sl, size_t bytes) {
    spk_cuda_free(sl.device);
    cudaCheck(cudaFreeHost(sl.pinned));
    sl.device = (char *)spk_cuda_malloc(bytes);
    cudaCheck(cudaMallocHost((void **)&sl.pinned, bytes));
    sl.cap = bytes;
}

}  // namespace

extern "C" spk_staging_t *spk_cuda_staging_create(void) {
    Staging *st = new Staging;
    cudaCheck(cudaStreamCreateWithFlags(&st->copy, cudaStreamNonBlocking));
    for (Slot &sl : st->slot) {
        cudaCheck(cudaMallocHost((void **)&sl.result, SPK_STAGING_FETCH_BYTES));
        sl.copied = new_event();
        sl.consumed = new_event();
        sl.fetched = new_event();
    }
    return reinterpret_cast<spk_staging_t *>(st);
}

extern "C" void spk_cuda_staging_free(spk_staging_t *s) {
    if (!s) return;
    Staging *st = of(s);
    cudaCheck(cudaStreamSynchronize(st->copy));
    spk_cuda_sync();
    for (Slot &sl : st->slot) {
        spk_cuda_free(sl.device);
        cudaCheck(cudaFreeHost(sl.pinned));
        cudaCheck(cudaFreeHost(sl.result));
        cudaCheck(cudaEventDestroy(sl.copied));
        cudaCheck(cudaEventDestroy(sl.consumed));
        cudaCheck(cudaEventDestroy(sl.fetched));
    }
    cudaCheck(cudaStreamDestroy(st->copy));
    delete st;
}

extern "C" void spk_cuda_staging_begin(spk_staging_t *s, size_t bytes) {
    Staging *st = of(s);
    // Everything queued so far is the last batch's use of the slot being closed.
    if (st->opened) cudaCheck(cudaEventRecord(st->slot[st->cur].consumed, spk_cuda_stream()));
    st->opened = 1;
    st->cur ^= 1;
    Slot &sl = st->slot[st->cur];
    cudaCheck(cudaEventSynchronize(sl.copied));  // the pinned buffer's last upload has read it
    if (bytes > sl.cap) grow(sl, bytes);
    sl.used = 0;
}

extern "C" const void *spk_cuda_staging_put(spk_staging_t *s, const void *host, size_t bytes) {
    Staging *st = of(s);
    Slot &sl = st->slot[st->cur];
    const size_t at = sl.used;
    sl.used += (bytes + SPK_STAGING_ALIGN - 1) / SPK_STAGING_ALIGN * SPK_STAGING_ALIGN;
    SPK_ASSERT(sl.used <= sl.cap || bytes == 0);
    if (bytes) memcpy(sl.pinned + at, host, bytes);
    return sl.device + at;
}

extern "C" void spk_cuda_staging_ready(spk_staging_t *s) {
    Staging *st = of(s);
    Slot &sl = st->slot[st->cur];
    if (sl.used == 0) return;
    const size_t bytes = sl.used < sl.cap ? sl.used : sl.cap;
    cudaCheck(cudaStreamWaitEvent(st->copy, sl.consumed, 0));  // its last batch's kernels are done
    cudaCheck(cudaMemcpyAsync(sl.device, sl.pinned, bytes, cudaMemcpyHostToDevice, st->copy));
    cudaCheck(cudaEventRecord(sl.copied, st->copy));
    cudaCheck(cudaStreamWaitEvent(spk_cuda_stream(), sl.copied, 0));
}

extern "C" void spk_cuda_staging_fetch(spk_staging_t *s, const void *src, size_t bytes) {
    Staging *st = of(s);
    Slot &sl = st->slot[st->cur];
    SPK_ASSERT(bytes <= SPK_STAGING_FETCH_BYTES);
    cudaCheck(cudaMemcpyAsync(sl.result, src, bytes, cudaMemcpyDeviceToHost, spk_cuda_stream()));
    cudaCheck(cudaEventRecord(sl.fetched, spk_cuda_stream()));
}

extern "C" const void *spk_cuda_staging_fetched(spk_staging_t *s, int age) {
    Staging *st = of(s);
    SPK_ASSERT(age == 0 || age == 1);
    Slot &sl = st->slot[st->cur ^ age];
    cudaCheck(cudaEventSynchronize(sl.fetched));
    return sl.result;
}
