// Preemption: SIGUSR1 (Slurm's --signal) and SIGTERM (scancel, preemption, time limit) only
// set a flag. The trainer checks it at every step boundary; ranks get the signal at
// different moments, so they agree through the step's allreduce before checkpointing.
#pragma once

void signals_install(void);
int signals_pending(void);       // the signal number received, or 0
const char *signals_name(int sig);
