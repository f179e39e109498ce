// Preemption: SIGUSR1 (Slurm's --signal) and SIGTERM (scancel, preemption, time limit) only
// set a flag. The trainer checks it at every step boundary; ranks get the signal at
// different moments, so they agree through the step's allreduce before checkpointing.
// From the signal on, a rank must not go longer than SPKDDP_STOP_GRACE seconds (default
// 25) without meeting the others (signals_progress: a step's allreduce, a validation batch,
// a checkpoint's barrier); a second signal ends it at once. A rank whose peer died or stopped
// must not wait for the scheduler's SIGKILL: it exits 1 with one line.
#pragma once

// Installed before MPI starts (app/main.c), so a signal during start-up, data loading or
// resume is kept for the first agreement instead of killing the rank.
void signals_install(void);
int signals_pending(void);  // the signal number received, or 0
// Every rank has just met: a stop in progress gets a fresh grace period.
void signals_progress(void);
const char *signals_name(int sig);
