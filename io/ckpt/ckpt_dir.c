#include "io/ckpt/ckpt_dir.h"

#include "io/common/atomic_file.h"
#include "kernels/base/check.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int step_of(const char *name, int64_t *step) {
    long long s;
    int len = 0;
    if (strncmp(name, "ckpt-", 5) != 0 || name[5] < '0' || name[5] > '9') return 0;
    if (sscanf(name, "ckpt-%lld.h5%n", &s, &len) != 1 || len != (int)strlen(name) || s < 0) return 0;
    *step = s;
    return 1;
}

static int cmp_newest_first(const void *a, const void *b) {
    int64_t x = ((const ckpt_entry_t *)a)->step, y = ((const ckpt_entry_t *)b)->step;
    return x < y ? 1 : x > y ? -1 : strcmp(((const ckpt_entry_t *)a)->path, ((const ckpt_entry_t *)b)->path);
}

int ckpt_dir_list(const char *dir, ckpt_entry_t **out) {
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int64_t step;
        if (!step_of(e->d_name, &step) || strlen(dir) + strlen(e->d_name) + 2 > CKPT_PATH_MAX) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            ckpt_entry_t *g = realloc(*out, (size_t)cap * sizeof **out);
            if (!g) spk_die(SPK_EXIT_FAILURE, "out of memory listing %s", dir);
            *out = g;
        }
        (*out)[n].step = step;
        snprintf((*out)[n].path, CKPT_PATH_MAX, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    if (n > 0) qsort(*out, (size_t)n, sizeof **out, cmp_newest_first);
    return n;
}

int ckpt_find_latest(const char *dir, char *path_out, size_t cap) {
    ckpt_entry_t *list;
    int n = ckpt_dir_list(dir, &list), found = 0;
    char err[1024];
    for (int i = 0; i < n && !found; i++) {
        found = ckpt_verify(list[i].path, NULL, err, sizeof err) == 0;
        if (found)
            snprintf(path_out, cap, "%s", list[i].path);
        else
            spk_warn("skipping %s", err);
    }
    if (!found && n > 0) {  // none verifies: the caller loads the newest and says why
        snprintf(path_out, cap, "%s", list[0].path);
        found = -1;
    }
    free(list);
    return found;
}

int ckpt_dir_set_aside(const char *dir, int64_t step, const char *subdir, char *err, size_t cap) {
    ckpt_entry_t *list;
    int n = ckpt_dir_list(dir, &list), moved = 0;
    char to_dir[CKPT_PATH_MAX], to[CKPT_PATH_MAX + 64];
    snprintf(to_dir, sizeof to_dir, "%s/%s", dir, subdir);
    for (int i = 0; i < n && list[i].step > step; i++) {
        if (moved == 0 && mkdir(to_dir, 0777) != 0 && errno != EEXIST) {
            snprintf(err, cap, "%s: cannot create (%s)", to_dir, strerror(errno));
            moved = -1;
            break;
        }
        snprintf(to, sizeof to, "%s/%s", to_dir, strrchr(list[i].path, '/') + 1);
        if (atomic_rename_no_replace(list[i].path, to) != 0) {
            snprintf(err, cap, "%s: cannot move it to %s (%s)", list[i].path, to_dir, strerror(errno));
            moved = -1;
            break;
        }
        moved++;
    }
    free(list);
    return moved;
}

// ---- rotation --------------------------------------------------------------------------

void ckpt_keeper_init(ckpt_keeper_t *k, int keep) {
    memset(k, 0, sizeof *k);
    k->keep = keep;
}

static void record(ckpt_keeper_t *k, const char *path) {
    if (k->n == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 8;
        void *g = realloc(k->path, (size_t)k->cap * sizeof *k->path);
        if (!g) spk_die(SPK_EXIT_FAILURE, "out of memory recording checkpoints");
        k->path = g;
    }
    snprintf(k->path[k->n++], CKPT_PATH_MAX, "%s", path);
}

int ckpt_keeper_adopt(ckpt_keeper_t *k, const char *dir, uint64_t run_id, int64_t step) {
    if (run_id == 0) return 0;
    ckpt_entry_t *list;
    int n = ckpt_dir_list(dir, &list), adopted = 0;
    ckpt_meta_t *m = mallocCheck(sizeof *m);
    char err[1024];
    for (int i = n - 1; i >= 0; i--) {  // oldest first, the order of the record
        if (list[i].step > step) continue;
        if (ckpt_verify(list[i].path, m, err, sizeof err) == 0 && m->run_id == run_id) {
            record(k, list[i].path);
            adopted++;
        }
    }
    free(m);
    free(list);
    return adopted;
}

void ckpt_keeper_add(ckpt_keeper_t *k, const char *path) {
    record(k, path);
    if (k->keep <= 0 || k->n <= k->keep) return;
    int drop = k->n - k->keep;
    for (int i = 0; i < drop; i++)
        if (unlink(k->path[i]) != 0 && errno != ENOENT)
            spk_warn("%s: cannot remove an old checkpoint (%s)", k->path[i], strerror(errno));
    memmove(k->path, k->path + drop, (size_t)k->keep * sizeof *k->path);
    k->n = k->keep;
}

void ckpt_keeper_free(ckpt_keeper_t *k) {
    free(k->path);
    memset(k, 0, sizeof *k);
}
