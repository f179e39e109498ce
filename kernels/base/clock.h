// The one clock every timing in spkddp reads: monotonic seconds, immune to clock steps.
#pragma once
#include <time.h>

static inline double spk_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
