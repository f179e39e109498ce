#include "kernels/nccl_comm.h"

#include "kernels/base/check.h"
#include "kernels/base/clock.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/exact_sum_stream.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if !defined(NCCL_VERSION_CODE) || NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error \
    "spkddp needs NCCL 2.14 or newer (ncclAvg, non-blocking communicators): set NCCL_ROOT, or configure with -DSPKDDP_CUDA=OFF"
#endif

struct nccl_comm {
    ncclComm_t comm;
    cudaStream_t stream;  // NCCL's own
    cudaEvent_t ready;    // kernels' stream -> NCCL stream
    cudaEvent_t done[2];  // NCCL stream -> kernels' stream, for the last two steps in turn
    cudaEvent_t joined;   // NCCL stream -> kernels' stream within a step (nccl_join)
    cudaEvent_t batch;    // the end of a global-batch collective (nccl_allgather, nccl_reduce_scatter)
    int cur;              // done[cur] follows the latest step's allreduces
    double timeout_s;
    int rank, size;
};

static const struct timespec g_nap = {0, 20 * 1000};  // 20 us between polls

// Every call on the communicator goes through here. The communicator is non-blocking, so NCCL
// may answer ncclInProgress (its set-up, connections it makes at a first collective, the final
// flush); then the state is polled until it settles, within the deadline, so a peer that never
// joins cannot hang the job. A failure names the call and NCCL's own reason; NCCL_DEBUG=WARN
// (set unless the user chose a level) has printed NCCL's warnings above it.
static void nccl_settle_at(nccl_comm_t *n, ncclResult_t r, const char *call, const char *file, int line) {
    const double deadline = spk_seconds() + n->timeout_s;
    while (r == ncclInProgress) {
        if (spk_seconds() > deadline) {
            ncclCommAbort(n->comm);
            spk_die_at(file, line, SPK_EXIT_FAILURE,
                       "NCCL call %s over %d ranks did not finish in %.0f s: a peer rank never joined, or the "
                       "network between its GPUs is blocked (NCCL_DEBUG=%s; set SPKDDP_NCCL_TIMEOUT to wait longer)",
                       call, n->size, n->timeout_s, getenv("NCCL_DEBUG"));
        }
        nanosleep(&g_nap, NULL);
        ncclResult_t state = ncclInProgress;
        if (ncclCommGetAsyncError(n->comm, &state) != ncclSuccess) state = ncclInternalError;
        r = state;
    }
    if (r != ncclSuccess) {
        const char *why = ncclGetLastError(n->comm);
        if (n->comm) ncclCommAbort(n->comm);
        spk_die_at(file, line, SPK_EXIT_FAILURE, "NCCL call %s failed: %s%s%s (NCCL_DEBUG=%s)", call,
                   ncclGetErrorString(r), why && why[0] ? ": " : "", why ? why : "", getenv("NCCL_DEBUG"));
    }
}
#define ncclSettle(n, call) nccl_settle_at((n), (call), #call, __FILE__, __LINE__)

_Static_assert(sizeof(ncclUniqueId) == NCCL_COMM_ID_BYTES, "kernels/nccl_comm.h: the size of an ncclUniqueId");

// NCCL reads NCCL_DEBUG at its first call, which is one of the two below on every rank; WARN
// is silent unless something fails.
static void nccl_debug_default(void) { setenv("NCCL_DEBUG", "WARN", 0); }

void nccl_comm_unique_id(void *id) {
    nccl_debug_default();
    ncclUniqueId u;
    ncclCheck(ncclGetUniqueId(&u));
    memcpy(id, &u, sizeof u);
}

nccl_comm_t *nccl_comm_create(int rank, int size, const void *id, double timeout_s) {
    nccl_comm_t *n = callocCheck(1, sizeof *n);
    n->timeout_s = timeout_s;
    n->rank = rank;
    n->size = size;
    nccl_debug_default();
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclSettle(n, ncclCommInitRankConfig(&n->comm, size, u, rank, &config));
    cudaCheck(cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking));
    cudaCheck(cudaEventCreateWithFlags(&n->ready, cudaEventDisableTiming));
    for (int i = 0; i < 2; i++) cudaCheck(cudaEventCreateWithFlags(&n->done[i], cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&n->joined, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&n->batch, cudaEventDisableTiming));
    return n;
}

// Waits for `done` with a deadline, watching for NCCL's asynchronous errors; `what` (count
// floats) names the collective in the message.
static void wait_done(nccl_comm_t *n, cudaEvent_t done, int64_t count, const char *what) {
    const double deadline = spk_seconds() + n->timeout_s;
    for (;;) {
        cudaError_t q = cudaEventQuery(done);
        if (q == cudaSuccess) return;
        ncclResult_t async = ncclSuccess;
        ncclCheck(ncclCommGetAsyncError(n->comm, &async));
        if (q != cudaErrorNotReady && (async == ncclSuccess || async == ncclInProgress))
            // CUDA errors are sticky: this is the first failed kernel of the step, most likely
            // not NCCL's (it reports no error).
            spk_die(SPK_EXIT_FAILURE,
                    "a CUDA kernel of this training step failed: %s (%s); a device-side assertion printed above "
                    "names the kernel and the condition (e.g. a label outside [0, classes))",
                    cudaGetErrorString(q), cudaGetErrorName(q));
        if (async != ncclSuccess && async != ncclInProgress) {
            ncclCommAbort(n->comm);
            spk_die(SPK_EXIT_FAILURE, "NCCL %s failed (%s: %s); is a peer rank gone?", what, ncclGetErrorString(async),
                    ncclGetLastError(NULL));
        }
        if (spk_seconds() > deadline) {
            ncclCommAbort(n->comm);
            spk_die(SPK_EXIT_FAILURE,
                    "NCCL %s of %lld floats over %d ranks did not finish in %.0f s: a peer rank is "
                    "dead or stuck (set SPKDDP_NCCL_TIMEOUT to wait longer)",
                    what, (long long)count, n->size, n->timeout_s);
        }
        nanosleep(&g_nap, NULL);
    }
}

void nccl_allreduce_start(nccl_comm_t *n, float *buf, int64_t count) {
    // One event serves every bucket: a stream waits for the record made just before its wait.
    cudaCheck(cudaEventRecord(n->ready, spk_cuda_stream()));
    cudaCheck(cudaStreamWaitEvent(n->stream, n->ready, 0));
    ncclSettle(n, ncclAllReduce(buf, buf, (size_t)count, ncclFloat, ncclAvg, n->comm, n->stream));
}

void nccl_exact_allreduce_start(nccl_comm_t *n, xsum_t s, int8_t *max, int64_t count) {
    cudaCheck(cudaEventRecord(n->ready, spk_cuda_stream()));
    cudaCheck(cudaStreamWaitEvent(n->stream, n->ready, 0));
    ncclSettle(n, ncclAllReduce(s.bin, max, (size_t)count, ncclInt8, ncclMax, n->comm, n->stream));
    xsum_raise_to_cuda_stream(n->stream, s, max, count);
    ncclCheck(ncclGroupStart());
    ncclCheck(ncclAllReduce(s.hi, s.hi, (size_t)count, ncclInt64, ncclSum, n->comm, n->stream));
    ncclCheck(ncclAllReduce(s.lo, s.lo, (size_t)count, ncclInt64, ncclSum, n->comm, n->stream));
    ncclSettle(n, ncclGroupEnd());  // a group's calls are settled at its end
}

// Rank i's share of count sums: [count i / R, count (i + 1) / R).
static int64_t share_at(const nccl_comm_t *n, int64_t count, int i) { return count * i / n->size; }

void nccl_exact_words_start(nccl_comm_t *n, xsum_t s, float *y, int64_t count) {
    const int me = n->rank;
    const int64_t at = share_at(n, count, me), len = share_at(n, count, me + 1) - at;
    uint64_t *w = (uint64_t *)(void *)s.hi, *rows = (uint64_t *)(void *)s.lo;
    cudaCheck(cudaEventRecord(n->ready, spk_cuda_stream()));
    cudaCheck(cudaStreamWaitEvent(n->stream, n->ready, 0));
    xsum_to_words_cuda_stream(n->stream, w, s, count);
    ncclCheck(ncclGroupStart());  // each share's words to its owner; the peers' words of ours, in rank order
    for (int p = 0, k = 0; p < n->size; p++) {
        if (p == me) continue;
        const int64_t from = share_at(n, count, p), to = share_at(n, count, p + 1);
        if (to > from) ncclCheck(ncclSend(w + from, (size_t)(to - from), ncclUint64, p, n->comm, n->stream));
        if (len > 0)
            ncclCheck(ncclRecv(rows + (size_t)k++ * (size_t)len, (size_t)len, ncclUint64, p, n->comm, n->stream));
    }
    ncclSettle(n, ncclGroupEnd());
    xsum_words_round_cuda_stream(n->stream, y + at, w + at, rows, n->size - 1, len);
    ncclCheck(ncclGroupStart());  // our share's floats to every peer, theirs to us
    for (int p = 0; p < n->size; p++) {
        if (p == me) continue;
        const int64_t from = share_at(n, count, p), to = share_at(n, count, p + 1);
        if (len > 0) ncclCheck(ncclSend(y + at, (size_t)len, ncclFloat, p, n->comm, n->stream));
        if (to > from) ncclCheck(ncclRecv(y + from, (size_t)(to - from), ncclFloat, p, n->comm, n->stream));
    }
    ncclSettle(n, ncclGroupEnd());
}

void nccl_join(nccl_comm_t *n) {
    cudaCheck(cudaEventRecord(n->joined, n->stream));
    cudaCheck(cudaStreamWaitEvent(spk_cuda_stream(), n->joined, 0));
}

void nccl_allreduce_end(nccl_comm_t *n, int64_t total) {
    n->cur ^= 1;
    cudaCheck(cudaEventRecord(n->done[n->cur], n->stream));
    cudaCheck(cudaStreamWaitEvent(spk_cuda_stream(), n->done[n->cur], 0));
    wait_done(n, n->done[n->cur ^ 1], total,
              "gradient allreduce");  // the step before's: long done, unless a peer is gone
}

void nccl_allreduce_drain(nccl_comm_t *n, int64_t total) { wait_done(n, n->done[n->cur], total, "gradient allreduce"); }

// After the kernels queued so far, on NCCL's stream; the host waits for it with the deadline.
static void batch_collective(nccl_comm_t *n, const float *send, float *recv, int64_t count, int gather) {
    cudaCheck(cudaEventRecord(n->ready, spk_cuda_stream()));
    cudaCheck(cudaStreamWaitEvent(n->stream, n->ready, 0));
    if (gather)
        ncclSettle(n, ncclAllGather(send, recv, (size_t)count, ncclFloat, n->comm, n->stream));
    else
        ncclSettle(n, ncclReduceScatter(send, recv, (size_t)count, ncclFloat, ncclSum, n->comm, n->stream));
    cudaCheck(cudaEventRecord(n->batch, n->stream));
    wait_done(n, n->batch, count * (gather ? n->size : 1), gather ? "all-gather" : "reduce-scatter");
}

void nccl_allgather(nccl_comm_t *n, const float *send, float *recv, int64_t count) {
    batch_collective(n, send, recv, count, 1);
}

void nccl_reduce_scatter(nccl_comm_t *n, const float *send, float *recv, int64_t count) {
    batch_collective(n, send, recv, count, 0);
}

void nccl_comm_destroy(nccl_comm_t *n) {
    if (!n) return;
    cudaCheck(cudaStreamSynchronize(n->stream));
    ncclSettle(n, ncclCommFinalize(n->comm));
    ncclCheck(ncclCommDestroy(n->comm));
    cudaCheck(cudaEventDestroy(n->ready));
    for (int i = 0; i < 2; i++) cudaCheck(cudaEventDestroy(n->done[i]));
    cudaCheck(cudaEventDestroy(n->joined));
    cudaCheck(cudaEventDestroy(n->batch));
    cudaCheck(cudaStreamDestroy(n->stream));
    free(n);
}
