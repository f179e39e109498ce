// The main of a multi-rank test: MPI up, `check` on host memory and through cpu-staged copies,
// every rank's failures counted, one report from rank 0, MPI down.
#pragma once
#include "app/dist/comm.h"
#include "tests/test_util.h"

static int mpi_test_main(int argc, char **argv, const char *name,
                         void (*check)(const comm_t *, const spk_backend_t *)) {
    comm_t c;
    comm_init(&c, &argc, &argv);
    check(&c, &spk_backend_cpu);
    check(&c, &spk_backend_cpu_staged);
    double failures = test_failures;
    comm_allreduce_max_f64(&c, &failures, 1);
    const int rc = c.rank == 0 ? test_report(name) : (failures > 0);
    MPI_Finalize();
    return rc || failures > 0;
}
