#include "kernels/base/check.h"

#include <errno.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

_Noreturn static void abort_job(int code) {
    fflush(stdout);
    fflush(stderr);
    if (mpi_ready()) {
        // The launcher forwards our stderr through a pipe; MPI_Abort makes it kill every
        // process, sometimes before that last line got through. Give it a moment.
        if (spk_world() > 1) nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL);
        MPI_Abort(MPI_COMM_WORLD, code);
    }
    exit(code);
}

void spk_die_at(const char *file, int line, int code, const char *fmt, ...) {
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

void spk_exit_all(int code) {
    fflush(stdout);
    fflush(stderr);
    if (mpi_ready()) MPI_Finalize();
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
