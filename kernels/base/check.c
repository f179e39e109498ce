#include "kernels/base/check.h"

#include <errno.h>
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int mpi_ready(void) {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    return init && !fin;
}

int spk_rank(void) {
    int r = 0;
    if (mpi_ready()) MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

int spk_world(void) {
    int n = 1;
    if (mpi_ready()) MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

static void (*g_on_die)(void *);
static void *g_on_die_ctx;

void spk_on_die(void (*fn)(void *ctx), void *ctx) {
    g_on_die = fn;
    g_on_die_ctx = ctx;
}

// The launcher forwards our stderr through a pipe; MPI_Abort makes it kill every process,
// sometimes before that last line got through. Give it a moment.
static void let_the_last_line_through(void) {
    if (spk_world() > 1) nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL);
}

void spk_abort_from_thread(int code) {
    if (mpi_ready()) {
        let_the_last_line_through();
        MPI_Abort(MPI_COMM_WORLD, code);
    }
    _exit(code);
}

static int g_abort_code;
static void leave_now(void) { _exit(g_abort_code); }

_Noreturn static void abort_job(int code) {
    void (*cleanup)(void *) = g_on_die;
    g_on_die = NULL;  // once, even if the cleanup itself dies
    if (cleanup) cleanup(g_on_die_ctx);
    fflush(stdout);
    fflush(stderr);
    if (mpi_ready()) {
        let_the_last_line_through();
        // MPI_Abort leaves through exit(), whose handlers would run the libraries' shutdown:
        // HDF5 closing a file whose MPI-IO handle is gone (SIGSEGV). Handlers run newest
        // first, so this one ends the process before theirs.
        g_abort_code = code;
        atexit(leave_now);
        MPI_Abort(MPI_COMM_WORLD, code);
    }
    exit(code);
}

static int (*g_stop_in_progress)(void);

void spk_die_yields_to(int (*stop_in_progress)(void)) { g_stop_in_progress = stop_in_progress; }

void spk_park_if_stopping(void) {
    if (g_stop_in_progress && g_stop_in_progress())
        for (;;) pause();
}

void spk_die_at(const char *file, int line, int code, const char *fmt, ...) {
    // One line a process: a second thread failing meanwhile (a loader thread and the main thread
    // meeting the same damaged file) waits for the first's abort to end it, and so does a
    // failure that follows from a stop under way, whose thread ends the process with its line.
    static atomic_int dying;
    if (atomic_exchange(&dying, 1))
        for (;;) pause();
    spk_park_if_stopping();
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fflush(stdout);
    fprintf(stderr, "spkddp: error: [rank %d] %s (%s:%d)\n", spk_rank(), msg, file, line);
    abort_job(code);
}

void spk_fail_all(int code, const char *fmt, ...) {
    if (spk_rank() == 0) {
        va_list ap;
        va_start(ap, fmt);
        fflush(stdout);
        fputs("spkddp: error: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
    spk_exit_all(code);
}

// MPI_Finalize may never return in a job that spans nodes: Debian 12's MPICH 4.0.2 closes its
// UCX endpoints with a flush that, over TCP, waits for the peer's acknowledgement, while a peer
// that finished closing first already waits in the PMI barrier and acknowledges nothing (MPICH
// 4.2 puts that barrier before the closes). Everything is written by then, so a rank still in
// MPI_Finalize after SPKDDP_FINALIZE_TIMEOUT seconds (default 30) leaves with its exit code.
static volatile sig_atomic_t g_exit_code;
static char g_timeout_msg[160];

static void on_finalize_timeout(int sig) {
    (void)sig;
    ssize_t r = write(STDERR_FILENO, g_timeout_msg, strlen(g_timeout_msg));
    (void)r;
    _exit(g_exit_code);
}

static void finalize_or_leave(int code) {
    const char *t = getenv("SPKDDP_FINALIZE_TIMEOUT");
    const unsigned secs = t && atoi(t) > 0 ? (unsigned)atoi(t) : 30;
    g_exit_code = code;
    snprintf(g_timeout_msg, sizeof g_timeout_msg,
             "spkddp: warning: [rank %d] MPI_Finalize has not returned after %u s; exiting with code %d\n", spk_rank(),
             secs, code);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_finalize_timeout;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm(secs);
    MPI_Finalize();
    alarm(0);
}

void spk_exit_all(int code) {
    fflush(stdout);
    fflush(stderr);
    if (mpi_ready()) finalize_or_leave(code);
    exit(code);
}

void spk_warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout);
    fprintf(stderr, "spkddp: warning: [rank %d] ", spk_rank());
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void printf0(const char *fmt, ...) {
    if (spk_rank() != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

void spk_mpi_fail(const char *file, int line, const char *call, int rc) {
    char err[MPI_MAX_ERROR_STRING] = "unknown MPI error";
    int len = 0;
    MPI_Error_string(rc, err, &len);
    spk_die_at(file, line, SPK_EXIT_FAILURE, "MPI call %s failed: %s", call, err);
}

void *spk_malloc_at(const char *file, int line, size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) spk_die_at(file, line, SPK_EXIT_FAILURE, "out of memory allocating %zu bytes", bytes);
    return p;
}

void *spk_calloc_at(const char *file, int line, size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) spk_die_at(file, line, SPK_EXIT_FAILURE, "out of memory allocating %zu x %zu bytes", count, size);
    return p;
}
