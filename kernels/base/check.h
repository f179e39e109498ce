// Failure reporting for every foreign call (MPI, HDF5, CUDA, cuDNN, cuBLAS, NCCL, malloc, stdio)
// and for bad input.
// Two kinds of failure:
//   spk_die(code, ...)    one rank found a problem: print "[rank r] file:line: sentence" and
//                         MPI_Abort the whole job, so no other rank waits forever.
//   spk_fail_all(code, ...) every rank reached the same verdict (config validation): rank 0
//                         prints one line, all ranks finalize and exit cleanly with `code`.
#pragma once
#include <stddef.h>
#include <stdio.h>

// Exit codes (documented in README "Exit codes").
enum spk_exit {
    SPK_EXIT_OK = 0,
    SPK_EXIT_FAILURE = 1,   // system/library failure (MPI, HDF5, I/O, out of memory)
    SPK_EXIT_USAGE = 2,     // bad command line or config value
    SPK_EXIT_DATA = 3,      // bad dataset content or shape
    SPK_EXIT_CKPT = 4,      // unusable or incompatible checkpoint
    SPK_EXIT_NUMERIC = 5,   // NaN/Inf loss or replicas diverged
    SPK_EXIT_REQUEUE = 75,  // checkpointed on a signal: requeue me (EX_TEMPFAIL)
};

#if defined(__GNUC__)
#define SPK_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SPK_PRINTF(a, b)
#endif

// The CUDA kernels (C++) report their failures through spk_die_at too.
#ifdef __cplusplus
#define SPK_NORETURN [[noreturn]]
extern "C" {
#else
#define SPK_NORETURN _Noreturn
#endif

SPK_NORETURN void spk_die_at(const char *file, int line, int code, const char *fmt, ...) SPK_PRINTF(4, 5);
SPK_NORETURN void spk_fail_all(int code, const char *fmt, ...) SPK_PRINTF(2, 3);
SPK_NORETURN void spk_exit_all(int code);              // every rank: finalize MPI and exit quietly
void spk_warn(const char *fmt, ...) SPK_PRINTF(1, 2);  // any rank, prefixed with the rank
void printf0(const char *fmt, ...) SPK_PRINTF(1, 2);   // rank 0 only, flushed
int spk_rank(void);                                    // world rank, 0 before MPI_Init
int spk_world(void);                                   // world size, 1 before MPI_Init

#define spk_die(code, ...) spk_die_at(__FILE__, __LINE__, (code), __VA_ARGS__)
// A cleanup spk_die runs once, after its line and before it ends the job: removing a temp
// file that would otherwise stay behind. One at a time; fn NULL clears it.
void spk_on_die(void (*fn)(void *ctx), void *ctx);
// A failure while stop_in_progress() says a stop is under way (another rank, stopped by the
// same signal, left first) prints nothing and waits for the stop to end the process.
void spk_die_yields_to(int (*stop_in_progress)(void));
// Waits for that stop to end the process if one is under way: before a wait on other ranks,
// whose transport may abort the process itself (UCX's backtrace) when a peer is gone.
void spk_park_if_stopping(void);
// Ends the job from a thread that is not MPI's (a watchdog) after it wrote its own line: no
// cleanup, no stdio, MPI_Abort after the launcher had a moment to forward that line.
SPK_NORETURN void spk_abort_from_thread(int code);

// MPI: the error handler is set to MPI_ERRORS_RETURN so every call can be checked here.
#define mpiCheck(call)                                                      \
    do {                                                                    \
        int mpi_rc_ = (call);                                               \
        if (mpi_rc_ != 0) spk_mpi_fail(__FILE__, __LINE__, #call, mpi_rc_); \
    } while (0)
SPK_NORETURN void spk_mpi_fail(const char *file, int line, const char *call, int rc);

// HDF5: negative return values (herr_t/hid_t/htri_t) are failures. `what` names the file or
// object so the message says what could not be done to which thing.
#define h5Check(call, ...)                                                             \
    ({                                                                                 \
        __typeof__(call) h5_rc_ = (call);                                              \
        if (h5_rc_ < 0) spk_die_at(__FILE__, __LINE__, SPK_EXIT_FAILURE, __VA_ARGS__); \
        h5_rc_;                                                                        \
    })

void *spk_malloc_at(const char *file, int line, size_t bytes);
void *spk_calloc_at(const char *file, int line, size_t count, size_t size);
#define mallocCheck(bytes)   spk_malloc_at(__FILE__, __LINE__, (bytes))
#define callocCheck(n, size) spk_calloc_at(__FILE__, __LINE__, (n), (size))

#ifdef __cplusplus
}
#endif
