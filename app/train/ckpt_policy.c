#include "app/train/ckpt_policy.h"

#include "io/common/atomic_file.h"
#include "kernels/base/check.h"
#include "kernels/base/clock.h"
#include "kernels/base/env.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

// A verdict rank 0 reaches and every rank acts on.
typedef struct {
    int code;
    char msg[1536];
} verdict_t;

static void settle(const comm_t *comm, verdict_t *v) {
    comm_bcast(comm, v, sizeof *v, MPI_BYTE, 0);
    if (v->code) spk_fail_all(v->code, "%s", v->msg);
}

// mkdir -p: 0, or -1 with errno.
static int make_dirs(const char *dir) {
    char p[CKPT_PATH_MAX];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) return -1;
        *s = '/';
    }
    return mkdir(p, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

// Creates and removes a file in dir: what writing a checkpoint will need.
static int takes_files(const char *dir) {
    char probe[CKPT_PATH_MAX + 64];
    snprintf(probe, sizeof probe, "%s/.spkddp-write-test-%ld", dir, (long)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) return -1;
    close(fd);
    unlink(probe);
    return 0;
}

// A directory this run created is removed again if the run ends before writing into it (a
// refused configuration, bad data): a failed start leaves the file system as it was.
static char g_created[CKPT_PATH_MAX];
static void remove_if_unused(void) { rmdir(g_created); }  // fails, harmlessly, when not empty

// Two runs writing one directory mix their checkpoints, and each checks for the other's only at
// its start: rank 0 holds an advisory lock on the directory (flock) for the run's life, which the
// kernel drops when the process ends, however it ends. A lock that is held is waited for, up to
// SPKDDP_CKPT_LOCK_WAIT seconds (default 120, at most half of SPKDDP_MPI_TIMEOUT, which the other
// ranks wait under): on a network file system a crashed node's lock lasts until the server's
// lease runs out, and the requeued run must not fail for it. A file system that cannot lock
// (some NFS and Lustre mounts) runs without one, as before. 0, or -1 when another process held
// it throughout.
static int g_lock_fd = -1;
static int lock_dir(const comm_t *comm, const char *dir) {
    if (g_lock_fd >= 0) return 0;
    const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return 0;
    double wait = spk_env_number("SPKDDP_CKPT_LOCK_WAIT", 120.0, 0.0, 1e6);
    if (comm->wait.timeout_s > 0 && wait > 0.5 * comm->wait.timeout_s) wait = 0.5 * comm->wait.timeout_s;
    const double end = spk_seconds() + wait;
    for (int tries = 0;; tries++) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            g_lock_fd = fd;
            return 0;
        }
        if (errno != EWOULDBLOCK) break;  // no locks here
        if (spk_seconds() >= end) {
            close(fd);
            return -1;
        }
        if (tries == 0) {
            printf(
                "note: --ckpt-dir %s is locked by another process; waiting up to %.0f s (a crashed run's lock on "
                "a network file system lasts until the server's lease ends)\n",
                dir, wait);
            fflush(stdout);
        }
        usleep(250000);
    }
    close(fd);
    return 0;
}

void ckpt_policy_check_dir(const comm_t *comm, const char *dir) {
    if (!dir[0]) return;
    verdict_t v = {0};
    struct stat st;
    if (comm->rank == 0) {
        if (stat(dir, &st) != 0 && errno == ENOENT && !g_created[0]) {
            snprintf(g_created, sizeof g_created, "%s", dir);
            atexit(remove_if_unused);
        }
        errno = 0;
        if (make_dirs(dir) != 0 || stat(dir, &st) != 0 || (!S_ISDIR(st.st_mode) && (errno = ENOTDIR)) ||
            takes_files(dir) != 0) {
            const int e = errno;
            v.code = SPK_EXIT_USAGE;
            snprintf(v.msg, sizeof v.msg, "train: --ckpt-dir %.1400s: checkpoints cannot be written there (%s)", dir,
                     strerror(e));
        } else if (lock_dir(comm, dir) != 0) {
            v.code = SPK_EXIT_CKPT;
            snprintf(v.msg, sizeof v.msg,
                     "train: --ckpt-dir %.1200s is being written by another spkddp run (it holds the directory's "
                     "lock): give another --ckpt-dir, or wait for that run to end",
                     dir);
        }
    }
    settle(comm, &v);
}

// ---- where a run may start ------------------------------------------------------------------

static void finished_path(const char *dir, char *out, size_t cap) { snprintf(out, cap, "%s/FINISHED", dir); }

// The step dir/FINISHED was written at, or -1 without one (0 when it cannot be read).
static int64_t finished_step(const char *dir) {
    char path[CKPT_PATH_MAX + 16];
    finished_path(dir, path, sizeof path);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long long step = 0;
    if (fscanf(f, "finished at global step %lld", &step) != 1) step = 0;
    fclose(f);
    return step;
}

// "ckpt-A.h5 ... ckpt-B.h5": the newest and the oldest of n entries, newest first.
static void name_range(const ckpt_entry_t *e, int n, char *out, size_t cap) {
    const char *newest = strrchr(e[0].path, '/') + 1, *oldest = strrchr(e[n - 1].path, '/') + 1;
    if (n == 1)
        snprintf(out, cap, "%s", newest);
    else
        snprintf(out, cap, "%s ... %s", oldest, newest);
}

// A fresh run: the directory must hold no checkpoint and no FINISHED marker.
static void fresh_start(const char *dir, verdict_t *v) {
    ckpt_entry_t *list;
    const int n = ckpt_dir_list(dir, &list);
    const int64_t fin = finished_step(dir);
    char what[700] = "a FINISHED marker";
    if (n > 0) {
        char names[600];
        name_range(list, n, names, sizeof names);
        snprintf(what, sizeof what, "%d checkpoint(s) (%s)%s", n, names, fin >= 0 ? " and a FINISHED marker" : "");
    }
    if (n > 0 || fin >= 0) {
        v->code = SPK_EXIT_CKPT;
        snprintf(v->msg, sizeof v->msg,
                 "%.600s already holds %s of another run: this fresh run's checkpoints would mix with them and "
                 "--resume auto would continue the newest; continue that run with --resume auto, or give another "
                 "--ckpt-dir",
                 dir, what);
    }
    free(list);
}

// A free name dir/abandoned-after-<step>[.k] for what a resume sets aside.
static void aside_name(const char *dir, int64_t step, char *sub, size_t cap) {
    char path[CKPT_PATH_MAX + 64];
    for (int k = 1;; k++) {
        if (k == 1)
            snprintf(sub, cap, "abandoned-after-%012lld", (long long)step);
        else
            snprintf(sub, cap, "abandoned-after-%012lld.%d", (long long)step, k);
        snprintf(path, sizeof path, "%s/%s", dir, sub);
        if (access(path, F_OK) != 0) return;
    }
}

// A resumed run at `step`: checkpoints (and a FINISHED marker) of later steps belong to the
// future it abandons. Refused, or moved aside when allowed; a FINISHED marker at or before
// the step is this run's past, and goes (the run continues, or marks itself again).
static void resumed_start(const char *dir, int64_t step, int set_aside, verdict_t *v) {
    ckpt_entry_t *list;
    const int n = ckpt_dir_list(dir, &list);
    int newer = 0;
    while (newer < n && list[newer].step > step) newer++;
    const int64_t fin = finished_step(dir);
    const int fin_newer = fin > step;
    char fin_path[CKPT_PATH_MAX + 16];
    finished_path(dir, fin_path, sizeof fin_path);
    if ((newer || fin_newer) && !set_aside) {
        char names[600] = "";
        if (newer) name_range(list, newer, names, sizeof names);
        v->code = SPK_EXIT_CKPT;
        snprintf(v->msg, sizeof v->msg,
                 "%.400s holds %d checkpoint(s) newer than step %lld, where this run resumes (%.400s%s): they are the "
                 "future this resume abandons, and its checkpoints would meet their names; move them into "
                 "%.400s/abandoned-after-%012lld/ with --set-aside-newer, or resume into another --ckpt-dir",
                 dir, newer, (long long)step, names, fin_newer ? newer ? " and FINISHED" : "FINISHED" : "", dir,
                 (long long)step);
    } else if (newer || fin_newer) {
        char sub[128], sub_path[CKPT_PATH_MAX + 160], to[CKPT_PATH_MAX + 180];
        aside_name(dir, step, sub, sizeof sub);
        snprintf(sub_path, sizeof sub_path, "%s/%s", dir, sub);
        int moved = newer ? ckpt_dir_set_aside(dir, step, sub, v->msg, sizeof v->msg) : 0;
        if (moved >= 0 && fin_newer) {
            snprintf(to, sizeof to, "%s/FINISHED", sub_path);
            if ((mkdir(sub_path, 0777) != 0 && errno != EEXIST) || atomic_rename_no_replace(fin_path, to) != 0) {
                snprintf(v->msg, sizeof v->msg, "%.600s: cannot move it to %.600s (%s)", fin_path, sub_path,
                         strerror(errno));
                moved = -1;
            }
        }
        if (moved < 0)
            v->code = SPK_EXIT_FAILURE;
        else
            printf0("set aside %d checkpoint(s)%s newer than step %lld into %s/ (--set-aside-newer)\n", moved,
                    fin_newer ? " and FINISHED" : "", (long long)step, sub_path);
    } else if (fin >= 0 && unlink(fin_path) != 0) {
        v->code = SPK_EXIT_FAILURE;
        snprintf(v->msg, sizeof v->msg, "%.1200s: cannot remove the finished marker of the run this one continues (%s)",
                 fin_path, strerror(errno));
    }
    free(list);
}

void ckpt_policy_start(ckpt_policy_t *p, const comm_t *comm, const char *dir, int64_t keep, int set_aside_newer,
                       const ckpt_meta_t *resumed) {
    memset(p, 0, sizeof *p);
    p->dir = dir;
    if (!p->dir[0]) return;
    verdict_t v = {0};
    if (comm->rank == 0) {
        if (resumed)
            resumed_start(p->dir, resumed->global_step, set_aside_newer, &v);
        else
            fresh_start(p->dir, &v);
    }
    settle(comm, &v);
    if (comm->rank != 0) return;
    ckpt_keeper_init(&p->keeper, (int)keep);
    p->run_id = resumed && resumed->run_id ? resumed->run_id : ckpt_new_run_id();
    if (resumed) ckpt_keeper_adopt(&p->keeper, p->dir, resumed->run_id, resumed->global_step);
}

void ckpt_policy_save(ckpt_policy_t *p, ckpt_meta_t *meta, const ckpt_tensors_t *t, char *path, size_t cap) {
    meta->run_id = p->run_id;
    ckpt_write(p->dir, meta, t, path, cap);
    ckpt_keeper_add(&p->keeper, path);
}

void ckpt_policy_mark_finished(const ckpt_policy_t *p, int64_t step) {
    char path[CKPT_PATH_MAX + 16];
    finished_path(p->dir, path, sizeof path);
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "finished at global step %lld\n", (long long)step) < 0 || fclose(f) != 0)
        spk_die(SPK_EXIT_FAILURE, "%s: cannot write the finished marker", path);
}

void ckpt_policy_free(ckpt_policy_t *p) { ckpt_keeper_free(&p->keeper); }
