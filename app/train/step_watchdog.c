#include "app/train/step_watchdog.h"

#include "kernels/base/check.h"
#include "kernels/base/clock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct {
    double timeout_s;
    _Atomic double met;  // when the ranks last met
    _Atomic int64_t step;
    pthread_mutex_t lock;  // guards stop; the thread naps on wake
    pthread_cond_t wake;
    int stop;
    pthread_t thread;
    int running;
} w = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

// Sleeps a second, or until step_watchdog_stop. Returns whether to stop.
static int nap(void) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    pthread_mutex_lock(&w.lock);
    while (!w.stop && pthread_cond_timedwait(&w.wake, &w.lock, &until) == 0) {}
    const int stop = w.stop;
    pthread_mutex_unlock(&w.lock);
    return stop;
}

static void *watch(void *arg) {
    (void)arg;
    while (!nap()) {
        const double since = spk_seconds() - atomic_load(&w.met);
        if (since > w.timeout_s) {
            // Not spk_die: MPI belongs to the main thread, which is the one stuck; but MPI_Abort
            // is only a message to the launcher and an exit, and a launcher that merely sees the
            // rank exit waits to clean up peers it may no longer reach (hydra with a host cut
            // off), while after an abort it ends the job at once.
            char msg[320], at[64] = "";
            const int64_t step = atomic_load(&w.step);
            if (step > 0) snprintf(at, sizeof at, " (global step %lld)", (long long)step);
            int n = snprintf(msg, sizeof msg,
                             "spkddp: error: [rank %d] the ranks have not met for %.0f s%s: a peer rank is dead, "
                             "stuck or unreachable, and this rank waits where MPI's deadline does not reach (a "
                             "collective read); exiting (twice SPKDDP_MPI_TIMEOUT)\n",
                             spk_rank(), since, at);
            ssize_t r = write(STDERR_FILENO, msg, n > 0 ? (size_t)n : 0);
            (void)r;
            spk_abort_from_thread(SPK_EXIT_FAILURE);
        }
    }
    return NULL;
}

void step_watchdog_start(double mpi_timeout_s) {
    w.timeout_s = 2.0 * mpi_timeout_s;
    atomic_store(&w.met, spk_seconds());
    w.stop = 0;
    if (!(w.timeout_s > 0)) return;
    if (pthread_create(&w.thread, NULL, watch, NULL) != 0)
        spk_die(SPK_EXIT_FAILURE, "cannot start the step watchdog thread");
    w.running = 1;
}

void step_watchdog_met(void) { atomic_store(&w.met, spk_seconds()); }

void step_watchdog_at_step(int64_t step) { atomic_store(&w.step, step); }

void step_watchdog_stop(void) {
    if (!w.running) return;
    pthread_mutex_lock(&w.lock);
    w.stop = 1;
    pthread_cond_signal(&w.wake);
    pthread_mutex_unlock(&w.lock);
    pthread_join(w.thread, NULL);
    w.running = 0;
}
