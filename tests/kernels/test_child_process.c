// kernels/base/child_process.h: a command's whole output; its exit status, a death by signal,
// a command that never ends its output (the deadline ends it and its whole pipeline), one
// that never stops writing (the cap), and the signal mask a child starts with (empty, though
// spkddp blocks its stop signals in every thread); the descriptors it holds (its pipe, /dev/null
// and its messages' file, never one of spkddp's) and its messages copied to spkddp's stderr.
#include "kernels/base/child_process.h"
#include "kernels/base/clock.h"
#include "tests/test_util.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Runs cmd with a deadline and a cap; returns child_read_all's and child_finish's verdicts.
static int run(const char *cmd, double timeout, size_t cap, char **out, size_t *len, char *err, int *status) {
    child_t c;
    *status = -2;
    if (child_start(&c, cmd, 'r', err, 256) != 0) return -1;
    unsigned char *buf;
    if (child_read_all(&c, timeout, cap, &buf, len, err, 256) != 0) return -2;
    *out = (char *)buf;
    return child_finish(&c, timeout, status, err, 256) != 0 ? -3 : 0;
}

int main(void) {
    char err[256], *out = NULL;
    size_t len;
    int status;
    EXPECT(run("printf 'hello\\n'", 5, 1 << 20, &out, &len, err, &status) == 0 && len == 6 &&
               memcmp(out, "hello\n", 6) == 0 && status == 0,
           "printf: %s", err);
    free(out);
    EXPECT(run("echo x; exit 3", 5, 1 << 20, &out, &len, err, &status) == -3 && status == 3 &&
               strstr(err, "exited with status 3"),
           "exit 3: status %d, '%s'", status, err);
    free(out);
    EXPECT(run("kill -9 $$", 5, 1 << 20, &out, &len, err, &status) == -3 && strstr(err, "killed by signal 9"),
           "kill -9: '%s'", err);
    free(out);

    // A descriptor of ours without close-on-exec (as MPI's sockets and mpiexec's pipes are): the
    // child must not hold it, or mpiexec would wait for the child after a rank died.
    const int ours = dup(STDOUT_FILENO);
    char probe[128];
    snprintf(probe, sizeof probe, "test -e /proc/self/fd/%d && echo held; ls /proc/self/fd | wc -l", ours);
    EXPECT(run(probe, 5, 1 << 20, &out, &len, err, &status) == 0 && !memmem(out, len, "held", 4) &&
               atoi(out) <= 4,  // 0, 1, 2 and the listing's own
           "the child holds our descriptor %d or more than its own: %.*s", ours, (int)len, out ? out : "");
    free(out);
    close(ours);
    // Its stderr reaches ours when it is done (the test's stderr, read back through a file).
    fflush(stderr);
    const int saved = dup(STDERR_FILENO);
    FILE *cap = tmpfile();
    dup2(fileno(cap), STDERR_FILENO);
    EXPECT(run("echo to-stderr-1097 >&2", 5, 1 << 20, &out, &len, err, &status) == 0, "echo to stderr: %s", err);
    free(out);
    dup2(saved, STDERR_FILENO);
    close(saved);
    char seen[256] = "";
    rewind(cap);
    EXPECT(fgets(seen, sizeof seen, cap) && strcmp(seen, "to-stderr-1097\n") == 0, "its stderr came as '%s'", seen);
    fclose(cap);

    // SIGTERM blocked here, as spkddp blocks it: the child must still start with an empty mask.
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, NULL);
    EXPECT(run("grep SigBlk /proc/self/status", 5, 1 << 20, &out, &len, err, &status) == 0 &&
               strstr(out, "0000000000000000"),
           "the child's mask: %.*s", (int)len, out ? out : "");
    free(out);

    // Endless: ends after the deadline, with the pipeline behind it.
    double t0 = spk_seconds();
    EXPECT(run("sleep 1097 | cat", 0.5, 1 << 20, &out, &len, err, &status) == -2 && strstr(err, "no end of its output"),
           "sleep 1097: '%s'", err);
    const double took = spk_seconds() - t0;
    EXPECT(took < 3.0, "the deadline of 0.5 s took %.2f s", took);
    usleep(100000);
    EXPECT(system("pgrep -f '^sleep 1097$' >/dev/null") != 0,
           "sleep 1097 outlived its deadline");  // a number of its own

    // Unbounded: ends at the cap.
    t0 = spk_seconds();
    EXPECT(run("yes 1097", 30, 1 << 20, &out, &len, err, &status) == -2 && strstr(err, "larger than 1 MiB"),
           "yes: '%s'", err);
    EXPECT(spk_seconds() - t0 < 10.0, "the cap took %.2f s", spk_seconds() - t0);
    return test_report("test_child_process");
}
