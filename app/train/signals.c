#include "app/train/signals.h"

#include "kernels/base/check.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t pending = 0;
static unsigned grace = 25;  // seconds without progress after a stop signal (Slurm's KillWait is 30)

static void say(const char *msg) {
    ssize_t r = write(STDERR_FILENO, msg, strlen(msg));
    (void)r;
}

// A rank stuck in a collective (its peer died or stopped) never reaches the next meeting: the
// grace timer, or a second signal, ends it instead of leaving the job to the scheduler.
static void on_signal(int sig) {
    if (sig == SIGALRM) {
        say(pending == SIGUSR1
                ? "spkddp: error: after SIGUSR1 the ranks did not meet within the grace period (a rank is "
                  "gone or stuck; SPKDDP_STOP_GRACE); exiting\n"
                : "spkddp: error: after SIGTERM the ranks did not meet within the grace period (a rank is "
                  "gone or stuck; SPKDDP_STOP_GRACE); exiting\n");
        _exit(SPK_EXIT_FAILURE);
    }
    if (pending) {
        say("spkddp: error: second signal while stopping; exiting without a checkpoint\n");
        _exit(SPK_EXIT_FAILURE);
    }
    pending = sig;
    alarm(grace);
}

void signals_install(void) {
    const char *g = getenv("SPKDDP_STOP_GRACE");
    if (g && atoi(g) > 0) grace = (unsigned)atoi(g);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // a read or write in progress completes
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGALRM, &sa, NULL);
}

int signals_pending(void) { return pending; }

void signals_progress(void) {
    if (pending) alarm(grace);
}

const char *signals_name(int sig) { return sig == SIGUSR1 ? "SIGUSR1" : sig == SIGTERM ? "SIGTERM" : "a signal"; }
