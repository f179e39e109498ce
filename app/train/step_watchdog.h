// A deadline on the training loop's meetings. When a peer goes silent -- its host
// unreachable, its processes neither dead nor answering -- MPI waits forever in a collective
// (a step's gradient allreduce or statistics, a collective read, a checkpoint's barrier, an
// epoch's summaries), and a launcher that sees no process die never ends the job. From
// step_watchdog_start to _stop a thread checks once a second that the ranks met (an allreduce,
// a collective read, a barrier: step_watchdog_met) less than SPKDDP_STEP_TIMEOUT seconds ago
// (default 600, like SPKDDP_NCCL_TIMEOUT; 0 turns it off); otherwise this rank exits 1 with
// one line and the launcher ends the others. Work on one rank between meetings (writing a
// checkpoint, scoring trials) must fit in the timeout. A meeting costs a clock read.
#pragma once
#include <stdint.h>

void step_watchdog_start(void);  // reads SPKDDP_STEP_TIMEOUT, starts the thread; the clock runs
void step_watchdog_met(void);    // the ranks have just met: the clock starts again
void step_watchdog_at_step(int64_t step);  // the global step, for the message
void step_watchdog_stop(void);
