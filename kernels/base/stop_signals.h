// Stop signals for every command: SIGTERM (scancel, preemption, a time limit), SIGINT (Ctrl-C,
// which a terminal sends to mpiexec and the ranks alike) and SIGUSR1 (Slurm's --signal).
//
// No handler runs inside the program's work. The signals are blocked before MPI and the
// libraries start their threads (which inherit the mask), and one thread of ours takes them
// with sigtimedwait. So no system call of any library is interrupted and the reaction is plain
// code, not async-signal-safe contortions. (One handler exists, on the way out: a stop at once
// holds the main thread still for the moment before the rank ends.) Two policies:
//   STOP_AT_SAFE_POINT (train): the signal is only recorded; the trainer reads it at every step
//     (stop_signals_pending), the ranks agree on a step, checkpoint and exit 75. From the signal
//     on, a rank that goes SPKDDP_STOP_GRACE seconds (default 25) without meeting the others
//     (stop_signals_progress) exits 1 with one line instead of holding the job.
//   STOP_AT_ONCE (every other command): the command ends at once with one line, exit 128+N
//     (0.1 s after the signal, so that the ranks stopped by one scancel or Ctrl-C end together);
//     its temp files are removed and its child processes ended, nothing partial stays. A
//     failure the stop causes (another rank stopped by the same signal left first) yields to
//     it: no second line.
// Copies of one stop (mpiexec and srun forward the signal the ranks also got directly) within
// 2 s of the first are the same stop; a signal after that ends the process at once.
#pragma once
#include <sys/types.h>

typedef enum { STOP_AT_SAFE_POINT, STOP_AT_ONCE } stop_policy_t;

// Before MPI starts (app/main.c). `command` names the command in the stop line.
void stop_signals_start(const char *command, stop_policy_t policy);
int stop_signals_pending(void);  // the signal number received, or 0
// MPI_Init has returned (app/dist/comm.c): a stop at once waits for it, up to 10 s, so that no
// rank leaves while the others' MPI_Init still needs it.
void stop_signals_mpi_started(void);
// The command has returned and its outputs are final (app/main.c): a stop at once from here
// lets the process end as it is about to, with the command's own exit code.
void stop_signals_command_done(void);
// The ranks have just met: a stop in progress gets a fresh grace period.
void stop_signals_progress(void);
const char *stop_signals_name(int sig);

// Files being written that a stop at once must not leave behind (up to 16 at a time).
void stop_signals_own_temp(const char *path);
void stop_signals_disown_temp(const char *path);
// Child processes (their process groups) a stop at once ends with SIGTERM.
void stop_signals_own_child(pid_t pgid);
void stop_signals_disown_child(pid_t pgid);
