#include "app/train/progress.h"
#include "kernels/base/clock.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

void progress_init(progress_t *p, double interval, int rank) {
    *p = (progress_t){.interval = rank == 0 ? interval : 0, .tty = rank == 0 && isatty(STDOUT_FILENO)};
    p->last = p->window_t0 = spk_seconds();
}

static void fmt_time(char *buf, size_t cap, double s) {
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, cap, "%ldh%02ldm", t / 3600, (t / 60) % 60);
    else if (t >= 60)
        snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, cap, "%lds", t);
}

void progress_step(progress_t *p, int64_t samples, double loss, int64_t epoch, int64_t epochs, int64_t step,
                   int64_t steps) {
    if (p->interval <= 0 && !p->tty) return;
    double t = spk_seconds();
    p->window_samples += samples;
    p->loss_sum += loss;
    p->loss_n++;
    double every = p->tty ? 0.25 : p->interval;
    // A log line only when the interval has passed (the epoch line follows the last step);
    // a terminal bar also on the last step, so it ends full.
    if (t - p->last < every && !(p->tty && step == steps)) return;
    double sps = (double)p->window_samples / (t - p->window_t0);
    double per_step = (t - p->window_t0) / (double)p->loss_n;
    double left_epoch = (double)(steps - step) * per_step;
    double left_run = left_epoch + (double)(epochs - epoch - 1) * (double)steps * per_step;
    char eta_e[32], eta_r[32];
    fmt_time(eta_e, sizeof eta_e, left_epoch);
    fmt_time(eta_r, sizeof eta_r, left_run);
    double pct = 100.0 * (double)step / (double)steps;
    if (p->tty) {
        char bar[21];
        int fill = (int)(pct / 5.0);
        for (int i = 0; i < 20; i++) bar[i] = i < fill ? '#' : '.';
        bar[20] = 0;
        printf("\repoch %lld/%lld [%s] %3.0f%%  loss %.4f  %.1f samples/s  ETA %s (run %s)   ", (long long)epoch + 1,
               (long long)epochs, bar, pct, p->loss_sum / (double)p->loss_n, sps, eta_e, eta_r);
    } else {
        printf("epoch %lld/%lld  step %lld/%lld (%.0f%%)  loss %.6f  %.1f samples/s  ETA epoch %s, run %s\n",
               (long long)epoch + 1, (long long)epochs, (long long)step, (long long)steps, pct,
               p->loss_sum / (double)p->loss_n, sps, eta_e, eta_r);
    }
    fflush(stdout);
    p->last = p->window_t0 = t;
    p->window_samples = 0;
    p->loss_sum = 0;
    p->loss_n = 0;
}

void progress_end_epoch(progress_t *p) {
    if (p->tty) {
        printf("\r%100s\r", "");
        fflush(stdout);
    }
}
