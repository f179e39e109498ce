// Child processes with deadlines: `/bin/sh -c CMD` started with posix_spawn in a process group of
// its own, with the default dispositions and an empty signal mask (spkddp blocks its stop
// signals in every thread: kernels/base/stop_signals.h), one end of a pipe to its stdout or
// stdin, and every wait bounded. A child that outlives its deadline is ended with its whole
// pipeline (SIGTERM to the group, SIGKILL a second later). While it runs, a stop signal to
// spkddp ends it too.
// The child holds no descriptor of spkddp's but that pipe: its messages (stderr, and stdout in
// mode 'w') go to a memory file that spkddp copies to its own stderr when the child is done,
// and its stdin in mode 'r' is /dev/null. A rank's stdout and stderr are mpiexec's pipes, and
// its sockets MPI's: a child (or a grandchild of a pipeline) that kept them would keep mpiexec
// waiting for their end after the rank itself died.
#pragma once
#include <stddef.h>
#include <sys/types.h>

typedef struct {
    pid_t pid;   // also its process group
    int fd;      // the pipe: its stdout (mode 'r') or its stdin (mode 'w'); -1 once closed
    int msg_fd;  // the memory file of its messages; -1 once copied out
} child_t;

// 0, or -1 with the reason in err (callers name the command).
int child_start(child_t *c, const char *cmd, char mode, char *err, size_t cap);
// Mode 'r': all of its stdout into *out (malloc'ed, *len bytes), at most max_bytes, within
// timeout_s seconds of the call. 0, or -1 with the reason in err; the child is then ended.
int child_read_all(child_t *c, double timeout_s, size_t max_bytes, unsigned char **out, size_t *len, char *err,
                   size_t cap);
// Closes the pipe and waits for the exit, at most timeout_s seconds (then ends the group).
// Returns 0 for exit status 0, else -1 with the reason in err ("the command exited with
// status N", "... was killed by signal N", "... did not exit within S s"); *status gets the
// exit status or -1.
int child_finish(child_t *c, double timeout_s, int *status, char *err, size_t cap);
