// FFTW's planner (and plan destruction) share global state: every plan spkddp creates or
// destroys, in any thread, is made under this one process-wide lock. Executing a plan needs
// no lock.
#pragma once

void fft_plan_lock(void);
void fft_plan_unlock(void);
