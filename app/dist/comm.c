#include "app/dist/comm.h"

#include "app/dist/threads.h"
#include "kernels/base/check.h"
#include "kernels/base/stop_signals.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Large messages are split so the MPI int count never overflows.
#define MAX_CHUNK (1 << 28)

void comm_init(comm_t *c, int *argc, char ***argv) {
    memset(c, 0, sizeof *c);
    int provided;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "spkddp: error: MPI could not start (MPI_Init_thread failed)\n");
        exit(SPK_EXIT_FAILURE);
    }
    stop_signals_mpi_started();
    c->world = MPI_COMM_WORLD;
    MPI_Comm_set_errhandler(c->world, MPI_ERRORS_RETURN);
    mpiCheck(MPI_Comm_rank(c->world, &c->rank));
    mpiCheck(MPI_Comm_size(c->world, &c->size));
    // srun without a PMI the MPI library understands starts N singletons: each task sees a
    // world of 1 and would train its own copy. Stop instead.
    const char *step_tasks = getenv("SLURM_STEP_NUM_TASKS");
    if (c->size == 1 && step_tasks && atoi(step_tasks) > 1)
        spk_fail_all(SPK_EXIT_USAGE,
                     "srun started %s tasks but MPI sees a world of 1: the tasks are not connected. Launch with "
                     "srun --mpi=pmi2 (or the PMI your MPICH was built for), or use mpiexec",
                     step_tasks);
    MPI_Comm node;
    mpiCheck(MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node));
    mpiCheck(MPI_Comm_rank(node, &c->local_rank));
    mpiCheck(MPI_Comm_size(node, &c->local_size));
    MPI_Comm_free(&node);
    c->wait = spk_wait_policy(c->local_size);
    spk_wait_set_default(&c->wait);
    c->threads = threads_configure(c->local_size);
}

void comm_wait(const comm_t *c, MPI_Request *req) { spk_mpi_wait(&c->wait, req, "an MPI collective"); }

static int64_t type_size(MPI_Datatype t) {
    int s;
    mpiCheck(MPI_Type_size(t, &s));
    return s;
}

void comm_bcast(const comm_t *c, void *buf, int64_t count, MPI_Datatype type, int root) {
    char *p = buf;
    int64_t ts = type_size(type);
    for (int64_t off = 0; off < count; off += MAX_CHUNK) {
        int n = (int)(count - off < MAX_CHUNK ? count - off : MAX_CHUNK);
        MPI_Request r;
        mpiCheck(MPI_Ibcast(p + off * ts, n, type, root, c->world, &r));
        comm_wait(c, &r);
    }
}

static void allreduce(const comm_t *c, void *buf, int64_t count, MPI_Datatype type, MPI_Op op) {
    char *p = buf;
    int64_t ts = type_size(type);
    for (int64_t off = 0; off < count; off += MAX_CHUNK) {
        int n = (int)(count - off < MAX_CHUNK ? count - off : MAX_CHUNK);
        MPI_Request r;
        mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, p + off * ts, n, type, op, c->world, &r));
        comm_wait(c, &r);
    }
}

void comm_allreduce_sum_f64(const comm_t *c, double *v, int n) {
    if (c->size > 1) allreduce(c, v, n, MPI_DOUBLE, MPI_SUM);
}

void comm_allreduce_max_f64(const comm_t *c, double *v, int n) {
    if (c->size > 1) allreduce(c, v, n, MPI_DOUBLE, MPI_MAX);
}

double comm_divergence(const comm_t *c, const float *theta, int64_t n, float *scratch) {
    if (c->size == 1) return 0.0;
    if (c->rank == 0) memcpy(scratch, theta, (size_t)n * sizeof(float));
    comm_bcast(c, scratch, n, MPI_FLOAT, 0);
    double d = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)theta[i] - (double)scratch[i]);
        if (e > d || isnan(e)) d = isnan(e) ? INFINITY : e;
    }
    comm_allreduce_max_f64(c, &d, 1);
    return d;
}

void comm_barrier(const comm_t *c) {
    MPI_Request r;
    mpiCheck(MPI_Ibarrier(c->world, &r));
    comm_wait(c, &r);
}

int64_t comm_allreduce_bytes(const comm_t *c, int64_t payload) { return 2 * payload * (c->size - 1) / c->size; }

int64_t comm_scatter_bytes(const comm_t *c, int64_t whole) { return whole * (c->size - 1) / c->size; }

void comm_library(char *out, size_t cap) {
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0, major = 0, minor = 0;
    MPI_Get_library_version(text, &len);
    MPI_Get_version(&major, &minor);
    text[strcspn(text, "\n")] = 0;  // MPICH: "MPICH Version:\t4.0.2", then more lines
    for (char *p = text; *p; p++)
        if (*p == '\t') *p = ' ';
    snprintf(out, cap, "%s (MPI %d.%d)", text, major, minor);
}
