#include "kernels/base/stop_signals.h"

#include "kernels/base/check.h"
#include "kernels/base/clock.h"
#include "kernels/base/env.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_TEMPS     16
#define MAX_CHILDREN  16
#define COPY_WINDOW_S 2.0   // a forwarded copy of the same stop arrives within this
#define MPI_START_S   10.0  // how long a stop at once waits for MPI_Init to finish
#define TOGETHER_S    0.1   // a stop at once ends the rank this long after the signal came

static struct {
    stop_policy_t policy;
    char command[32];
    int rank;            // from the launcher's environment: MPI may not be called from here
    double grace;        // seconds
    atomic_int pending;  // the first stop signal, or 0
    atomic_int mpi_up;   // MPI_Init has returned (stop_signals_mpi_started)
    atomic_int done;     // the command has returned (stop_signals_command_done)
    _Atomic double met;  // when the ranks last met (stop_signals_progress)
    double first;        // when the first stop signal came
    pthread_t main;      // the thread that started them, which runs the command
    pthread_mutex_t mu;  // guards the lists below
    char temps[MAX_TEMPS][PATH_MAX];
    pid_t children[MAX_CHILDREN];
} s = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void stop_set(sigset_t *set) {
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGUSR1);
}

const char *stop_signals_name(int sig) {
    return sig == SIGUSR1 ? "SIGUSR1" : sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "a signal";
}

int stop_signals_pending(void) { return atomic_load(&s.pending); }

void stop_signals_mpi_started(void) { atomic_store(&s.mpi_up, 1); }
void stop_signals_command_done(void) { atomic_store(&s.done, 1); }

// A stop at once is under way: the signal thread has it, or the kernel holds a stop signal
// for this process that the thread has not taken yet (another rank, stopped by the same
// scancel or Ctrl-C, may leave first, and this rank's MPI calls then fail).
static int stopping_at_once(void) {
    if (s.policy != STOP_AT_ONCE || atomic_load(&s.done)) return 0;
    if (atomic_load(&s.pending)) return 1;
    sigset_t waiting;
    if (sigpending(&waiting) != 0) return 0;
    return sigismember(&waiting, SIGTERM) == 1 || sigismember(&waiting, SIGINT) == 1 ||
           sigismember(&waiting, SIGUSR1) == 1;
}

// A rank that left inside MPI_Init would fail the others' MPI_Init, where MPI reports the
// failure itself (an abort trace, not our one line): a stop at once waits, a bounded time, for
// MPI to have started. Until then the main thread is only in MPI_Init and writes nothing.
static void await_mpi_start(void) {
    const double until = spk_seconds() + MPI_START_S;
    const struct timespec tick = {0, 1000 * 1000};
    while (!atomic_load(&s.mpi_up) && spk_seconds() < until) nanosleep(&tick, NULL);
}

void stop_signals_progress(void) { atomic_store(&s.met, spk_seconds()); }

static void list_put(const char *path, pid_t pgid) {
    pthread_mutex_lock(&s.mu);
    for (int i = 0; path && i < MAX_TEMPS; i++)
        if (!s.temps[i][0]) {
            snprintf(s.temps[i], PATH_MAX, "%s", path);
            break;
        }
    for (int i = 0; pgid > 0 && i < MAX_CHILDREN; i++)
        if (!s.children[i]) {
            s.children[i] = pgid;
            break;
        }
    pthread_mutex_unlock(&s.mu);
}

static void list_drop(const char *path, pid_t pgid) {
    pthread_mutex_lock(&s.mu);
    for (int i = 0; path && i < MAX_TEMPS; i++)
        if (strcmp(s.temps[i], path) == 0) {
            s.temps[i][0] = 0;
            break;
        }
    for (int i = 0; pgid > 0 && i < MAX_CHILDREN; i++)
        if (s.children[i] == pgid) {
            s.children[i] = 0;
            break;
        }
    pthread_mutex_unlock(&s.mu);
}

void stop_signals_own_temp(const char *path) { list_put(path, 0); }
void stop_signals_disown_temp(const char *path) { list_drop(path, 0); }
void stop_signals_own_child(pid_t pgid) { list_put(NULL, pgid); }
void stop_signals_disown_child(pid_t pgid) { list_drop(NULL, pgid); }

// The signal that holds the main thread still while a stop at once waits to end the rank: its
// command must not go on talking to ranks that may be gone.
#define FREEZE_SIGNAL (SIGRTMIN + 2)
static void freeze(int sig) {
    (void)sig;
    for (;;) pause();
}

// Ends the process from the signal thread: children stopped, temp files removed, one line
// (from rank 0 only when every rank says the same), then _exit: the other threads may hold
// any lock, so no exit handlers run. A rank that leaves alone (every_rank) ends the job
// through MPI, since the others may be waiting for it.
//
// A stop at once (every rank says the same) prints first, then ends the rank TOGETHER_S after
// the signal came, once MPI_Init has returned (await_mpi_start), its command held still
// meanwhile. The first rank to leave ends the job through the launcher (hydra SIGKILLs the
// others when one leaves without MPI_Finalize): ranks leaving at once left rank 0 no time to
// print when its signal thread ran a moment late, and a rank killed so is now and then what
// hydra reports as the job's exit code. Leaving together, each rank ends itself.
SPK_PRINTF(3, 4) _Noreturn static void leave(int code, int every_rank, const char *fmt, ...) {
    pthread_mutex_lock(&s.mu);
    int removed = 0;
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (s.children[i] > 0) kill(-s.children[i], SIGTERM);
    for (int i = 0; i < MAX_TEMPS; i++)
        if (s.temps[i][0] && unlink(s.temps[i]) == 0) removed++;
    if (every_rank || s.rank == 0) {
        char line[512];
        va_list ap;
        va_start(ap, fmt);
        int n = snprintf(line, sizeof line, "spkddp: error: [rank %d] %s: ", s.rank, s.command);
        n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
        va_end(ap);
        if (removed && n < (int)sizeof line)
            n += snprintf(line + n, sizeof line - (size_t)n, " (%d unfinished file%s removed)", removed,
                          removed > 1 ? "s" : "");
        if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
        line[n++] = '\n';
        fflush(stdout);
        ssize_t w = write(STDERR_FILENO, line, (size_t)n);
        (void)w;
    }
    if (every_rank) spk_abort_from_thread(code);
    await_mpi_start();
    pthread_kill(s.main, FREEZE_SIGNAL);
    const struct timespec tick = {0, 1000 * 1000};
    while (spk_seconds() < s.first + TOGETHER_S) nanosleep(&tick, NULL);
    _exit(code);
}

// The signal thread: waits for stop signals (and, during a safe-point stop, for the grace
// period to run out).
static void *watch(void *arg) {
    (void)arg;
    sigset_t set;
    stop_set(&set);
    for (;;) {
        const int pending = atomic_load(&s.pending);
        double left = INFINITY;
        if (pending) left = atomic_load(&s.met) + s.grace - spk_seconds();
        if (left <= 0)
            leave(SPK_EXIT_FAILURE, 1,
                  "after %s the ranks did not meet within %.0f s (a rank is gone or stuck; SPKDDP_STOP_GRACE); "
                  "exiting without a checkpoint",
                  stop_signals_name(pending), s.grace);
        siginfo_t info;
        int sig;
        if (isinf(left)) {
            sig = sigwaitinfo(&set, &info);
        } else {
            const double w = left < 1.0 ? left : 1.0;
            struct timespec ts = {(time_t)w, (long)((w - floor(w)) * 1e9)};
            sig = sigtimedwait(&set, &info, &ts);
        }
        if (sig < 0) continue;  // EAGAIN (the timeout) or EINTR
        const double now = spk_seconds();
        if (!pending) {
            s.first = now;
            atomic_store(&s.met, now);
            atomic_store(&s.pending, sig);
            if (s.policy == STOP_AT_ONCE && !atomic_load(&s.done)) {
                leave(128 + sig, 0, "stopped by %s before it finished; no partial file is left",
                      stop_signals_name(sig));
            }
        } else if (now - s.first > COPY_WINDOW_S) {
            leave(SPK_EXIT_FAILURE, 1, "%s while stopping; exiting at once without a checkpoint",
                  stop_signals_name(sig));
        }
    }
    return NULL;
}

static int env_rank(void) {
    const char *names[] = {"PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) return atoi(v);
    }
    return 0;
}

void stop_signals_start(const char *command, stop_policy_t policy) {
    s.policy = policy;
    snprintf(s.command, sizeof s.command, "%s", command);
    s.rank = env_rank();
    s.grace = spk_env_number("SPKDDP_STOP_GRACE", 25.0, 0.001, 86400.0);  // Slurm's KillWait is 30
    s.main = pthread_self();
    struct sigaction hold = {.sa_handler = freeze};
    sigemptyset(&hold.sa_mask);
    if (sigaction(FREEZE_SIGNAL, &hold, NULL) != 0) spk_die(SPK_EXIT_FAILURE, "cannot set up the stop signals");
    sigset_t set;
    stop_set(&set);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0) spk_die(SPK_EXIT_FAILURE, "cannot block the stop signals");
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, watch, NULL) != 0) spk_die(SPK_EXIT_FAILURE, "cannot start the signal thread");
    pthread_attr_destroy(&attr);
    spk_die_yields_to(stopping_at_once);
}
