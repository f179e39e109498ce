#include "app/dist/threads.h"

#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <unistd.h>

static int env_int(const char *name) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : 0;
}

int threads_configure(int local_ranks) {
    int n = env_int("SPKDDP_THREADS");
    if (n <= 0) n = env_int("OMP_NUM_THREADS");
    if (n <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        n = (int)(cores > 0 ? cores : 1) / (local_ranks > 0 ? local_ranks : 1);
    }
    if (n < 1) n = 1;
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
    return n;
}
