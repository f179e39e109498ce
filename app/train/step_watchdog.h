// A deadline on every training step. When a peer goes silent -- its host unreachable, its
// processes neither dead nor answering -- MPI waits forever in the step's collectives (the
// gradient allreduce, the statistics, the collective read of the next batches), and a
// launcher that sees no process die never ends the job. A thread checks once a second that
// the step in progress is younger than SPKDDP_STEP_TIMEOUT seconds (default 600, like
// SPKDDP_NCCL_TIMEOUT; 0 turns it off); otherwise this rank exits 1 with one line and the
// launcher ends the others. A step pays four clock reads and four stores.
#pragma once
#include <stdint.h>

void step_watchdog_start(void);  // reads SPKDDP_STEP_TIMEOUT, starts the thread
void step_watchdog_arm(int64_t step);  // a step begins (its number, for the message)
void step_watchdog_disarm(void);       // it ended
void step_watchdog_stop(void);
