// Progress for batch logs and terminals. Rank 0 prints a line every `interval` seconds
// (epoch, step, % of the epoch, loss, samples/s, ETA of the epoch and of the run); when
// stdout is a terminal the line is redrawn in place as a bar instead.
#pragma once
#include <stdint.h>

typedef struct {
    double interval;   // seconds between log lines (0: none)
    int tty;           // stdout is a terminal
    double last;       // time of the last output
    double window_t0;  // start of the throughput window
    int64_t window_samples;
    double loss_sum;  // since the last line
    int64_t loss_n;
} progress_t;

void progress_init(progress_t *p, double interval, int rank);
// After every step: samples of the step (global), its mean loss, where we are.
void progress_step(progress_t *p, int64_t samples, double loss, int64_t epoch, int64_t epochs, int64_t step,
                   int64_t steps);
void progress_end_epoch(progress_t *p);  // clears a terminal bar before the epoch line
