// Preemption: SIGUSR1 (Slurm's --signal) and SIGTERM (scancel, preemption, time limit) only
// set a flag. The trainer checks it at every step boundary; ranks get the signal at
// different moments, so they agree through the step's allreduce before checkpointing.
// After SIGTERM a rank has SPKDDP_STOP_GRACE seconds (default 25) to reach that agreement,
// and a second signal ends it at once: a rank whose peer died must not wait for SIGKILL.
#pragma once

void signals_install(void);
int signals_pending(void);       // the signal number received, or 0
void signals_agreed(void);       // every rank agreed to stop: the grace timer is off
const char *signals_name(int sig);
