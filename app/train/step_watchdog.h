// A backstop for waits the comm layer cannot time. comm_wait ends a collective that outlasts
// SPKDDP_MPI_TIMEOUT (app/dist/comm.h), but a rank can also wait inside HDF5's collective
// reads (MPI-IO), where no deadline reaches: a stopped or cut-off peer then holds the job
// forever. From step_watchdog_start to _stop a thread checks once a second that the ranks met
// (an allreduce, a collective read, a barrier: step_watchdog_met) less than twice that
// timeout ago -- twice, so comm_wait's own message comes first where it applies; otherwise
// this rank exits 1 with one line and the launcher ends the others. A meeting costs a clock
// read. Training runs it, and so does embed (its collective reads of the dataset).
#pragma once
#include <stdint.h>

void step_watchdog_start(double mpi_timeout_s);  // starts the thread (0: none); the clock runs
void step_watchdog_met(void);                    // the ranks have just met: the clock starts again
void step_watchdog_at_step(int64_t step);        // the global step, for the message
void step_watchdog_stop(void);
