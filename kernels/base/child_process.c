#include "kernels/base/child_process.h"

#include "kernels/base/clock.h"
#include "kernels/base/stop_signals.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

// The child's messages, copied to spkddp's stderr once it is done (at most the last 64 KiB).
static void forward_messages(child_t *c) {
    if (c->msg_fd < 0) return;
    const off_t size = lseek(c->msg_fd, 0, SEEK_END), keep = 1 << 16;
    if (size > 0 && lseek(c->msg_fd, size > keep ? size - keep : 0, SEEK_SET) >= 0) {
        char buf[4096];
        ssize_t n;
        while ((n = read(c->msg_fd, buf, sizeof buf)) > 0)
            if (write(STDERR_FILENO, buf, (size_t)n) != n) break;
    }
    close(c->msg_fd);
    c->msg_fd = -1;
}

int child_start(child_t *c, const char *cmd, char mode, char *err, size_t cap) {
    memset(c, 0, sizeof *c);
    c->fd = c->msg_fd = -1;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        snprintf(err, cap, "cannot make a pipe (%s)", strerror(errno));
        return -1;
    }
    const int msg = memfd_create("spkddp-child-messages", MFD_CLOEXEC);
    if (msg < 0) {
        snprintf(err, cap, "cannot make a file for its messages (%s)", strerror(errno));
        close(p[0]), close(p[1]);
        return -1;
    }
    const int ours = mode == 'r' ? p[0] : p[1], theirs = mode == 'r' ? p[1] : p[0];
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, theirs, mode == 'r' ? STDOUT_FILENO : STDIN_FILENO);
    if (mode == 'r')
        posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    else
        posix_spawn_file_actions_adddup2(&fa, msg, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, msg, STDERR_FILENO);
    posix_spawn_file_actions_addclosefrom_np(&fa, STDERR_FILENO + 1);
    posix_spawnattr_init(&at);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &all);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    char *argv[] = {"sh", "-c", (char *)cmd, NULL};
    const int rc = posix_spawn(&c->pid, "/bin/sh", &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(theirs);
    if (rc != 0) {
        close(ours);
        close(msg);
        snprintf(err, cap, "cannot start the command (%s)", strerror(rc));
        return -1;
    }
    c->fd = ours;
    c->msg_fd = msg;
    stop_signals_own_child(c->pid);
    return 0;
}

// SIGTERM to the whole pipeline, SIGKILL a second later if it is still there.
static void end_group(child_t *c) {
    kill(-c->pid, SIGTERM);
    for (int i = 0; i < 100; i++) {
        if (waitpid(c->pid, NULL, WNOHANG) == c->pid) {
            kill(-c->pid, SIGKILL);  // what is left of the pipeline
            return;
        }
        usleep(10000);
    }
    kill(-c->pid, SIGKILL);
    waitpid(c->pid, NULL, 0);
}

static void close_pipe(child_t *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
}

// A failure while reading: the output so far freed, the child ended, its pipe closed, the
// reason written.
static int give_up(child_t *c, unsigned char *buf, char *err, size_t cap, const char *why) {
    free(buf);
    snprintf(err, cap, "%s", why);
    close_pipe(c);
    end_group(c);
    stop_signals_disown_child(c->pid);
    forward_messages(c);
    return -1;
}

int child_read_all(child_t *c, double timeout_s, size_t max_bytes, unsigned char **out, size_t *len, char *err,
                   size_t cap) {
    *out = NULL;
    *len = 0;
    const double end = spk_seconds() + timeout_s;
    size_t have = 0, room = 1 << 16;
    unsigned char *buf = malloc(room);
    char why[200];
    for (;;) {
        if (!buf) return give_up(c, NULL, err, cap, "out of memory holding its output");
        const double left = end - spk_seconds();
        if (left <= 0) {
            snprintf(why, sizeof why, "no end of its output within %.0f s (--pipe-timeout)", timeout_s);
            return give_up(c, buf, err, cap, why);
        }
        struct pollfd pf = {c->fd, POLLIN, 0};
        const int r = poll(&pf, 1, left > 1.0 ? 1000 : (int)(left * 1000) + 1);
        if (r < 0 && errno != EINTR) {
            snprintf(why, sizeof why, "cannot wait for its output (%s)", strerror(errno));
            return give_up(c, buf, err, cap, why);
        }
        if (r <= 0) continue;
        if (have == room) {  // room grows to max_bytes + 1: one byte more says "too large"
            const size_t want = room * 2 < max_bytes + 1 ? room * 2 : max_bytes + 1;
            unsigned char *b = realloc(buf, want);
            if (!b) return give_up(c, buf, err, cap, "out of memory holding its output");
            buf = b;
            room = want;
        }
        const ssize_t got = read(c->fd, buf + have, room - have);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            snprintf(why, sizeof why, "cannot read its output (%s)", strerror(errno));
            return give_up(c, buf, err, cap, why);
        }
        if (got == 0) break;
        have += (size_t)got;
        if (have > max_bytes) {
            snprintf(why, sizeof why, "its output is larger than %zu MiB (--pipe-max-mib)", max_bytes >> 20);
            return give_up(c, buf, err, cap, why);
        }
    }
    *out = buf;
    *len = have;
    return 0;
}

int child_finish(child_t *c, double timeout_s, int *status, char *err, size_t cap) {
    close_pipe(c);
    const double end = spk_seconds() + timeout_s;
    int st = 0;
    pid_t r;
    while ((r = waitpid(c->pid, &st, WNOHANG)) == 0 && spk_seconds() < end) usleep(2000);
    stop_signals_disown_child(c->pid);
    *status = -1;
    if (r == 0) end_group(c);
    forward_messages(c);
    if (r == 0) {
        snprintf(err, cap, "the command did not exit within %.0f s; ended", timeout_s);
        return -1;
    }
    if (r < 0) {
        snprintf(err, cap, "cannot wait for the command (%s)", strerror(errno));
        return -1;
    }
    if (WIFEXITED(st)) {
        *status = WEXITSTATUS(st);
        if (*status == 0) return 0;
        snprintf(err, cap, "the command exited with status %d", *status);
        return -1;
    }
    snprintf(err, cap, "the command was killed by signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    return -1;
}
