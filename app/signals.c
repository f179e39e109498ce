#include "app/signals.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t pending = 0;

static void on_signal(int sig) { pending = sig; }

void signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // a read or write in progress completes
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int signals_pending(void) { return pending; }

const char *signals_name(int sig) {
    return sig == SIGUSR1 ? "SIGUSR1" : sig == SIGTERM ? "SIGTERM" : "a signal";
}
