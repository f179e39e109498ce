#include "kernels/base/mpi_wait.h"

#include "kernels/base/check.h"
#include "kernels/base/clock.h"
#include "kernels/base/env.h"

#include <time.h>
#include <unistd.h>

spk_wait_t spk_wait_policy(int ranks_on_node) {
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const int wait = spk_env_choice("SPKDDP_WAIT", "auto|spin|sleep");
    return (spk_wait_t){
        .sleepy = wait == 2 || (wait <= 0 && cores > 0 && ranks_on_node > cores),
        .timeout_s = spk_env_number("SPKDDP_MPI_TIMEOUT", 600.0, 0.0, 1e9),
    };
}

int spk_ranks_on_node(MPI_Comm comm) {
    MPI_Comm node;
    int n;
    mpiCheck(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    mpiCheck(MPI_Comm_size(node, &n));
    mpiCheck(MPI_Comm_free(&node));
    return n;
}

void spk_mpi_wait(const spk_wait_t *w, MPI_Request *req, const char *what) {
    if (!w->sleepy && w->timeout_s <= 0) {
        mpiCheck(MPI_Wait(req, MPI_STATUS_IGNORE));
        return;
    }
    const double deadline = spk_seconds() + w->timeout_s;
    const struct timespec nap = {0, 50 * 1000};
    for (unsigned polls = 1;; polls++) {
        spk_park_if_stopping();
        int done = 0;
        mpiCheck(MPI_Test(req, &done, MPI_STATUS_IGNORE));
        if (done) return;
        if (w->sleepy) nanosleep(&nap, NULL);
        if (w->timeout_s > 0 && polls % 1024 == 0 && spk_seconds() > deadline)
            spk_die(SPK_EXIT_FAILURE,
                    "%s has waited %.0f s for the other ranks: one of them is dead, stuck or unreachable "
                    "(SPKDDP_MPI_TIMEOUT sets the limit in seconds; 0 waits forever)",
                    what, w->timeout_s);
    }
}

static spk_wait_t g_default;
static int g_default_set;

void spk_wait_set_default(const spk_wait_t *w) {
    g_default = *w;
    g_default_set = 1;
}

const spk_wait_t *spk_wait_default(void) {
    if (!g_default_set) {
        const spk_wait_t w = spk_wait_policy(1);
        spk_wait_set_default(&w);
    }
    return &g_default;
}
