// Outputs checked against inputs (io/common/out_paths.h).
#include "io/common/out_paths.h"

#include "kernels/base/check.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int given(const char *p) { return p && p[0]; }

// The folder of `path` (dirname of a copy).
static void folder_of(const char *path, char *out, size_t cap) {
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    snprintf(out, cap, "%s", dirname(copy));
}

static void name_of(const char *path, char *out, size_t cap) {
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    snprintf(out, cap, "%s", basename(copy));
}

int out_paths_same(const char *a, const char *b) {
    struct stat sa, sb;
    const int ha = stat(a, &sa) == 0, hb = stat(b, &sb) == 0;
    if (ha && hb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ha != hb) return 0;  // one exists, the other does not
    char fa[4096], fb[4096], na[4096], nb[4096];
    folder_of(a, fa, sizeof fa), folder_of(b, fb, sizeof fb);
    name_of(a, na, sizeof na), name_of(b, nb, sizeof nb);
    return strcmp(na, nb) == 0 && stat(fa, &sa) == 0 && stat(fb, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

int out_paths_in_folder(const char *path, const char *folder) {
    char dir[4096];
    folder_of(path, dir, sizeof dir);
    return folder && folder[0] && out_paths_same(dir, folder);
}

static void check(const char *command, const path_arg_t *outs, int n_outs, const path_arg_t *ins, int n_ins,
                  int folders) {
    for (int i = 0; i < n_outs; i++) {
        const path_arg_t *o = &outs[i];
        if (!given(o->path)) continue;
        for (int j = 0; j < n_ins; j++)
            if (given(ins[j].path) && out_paths_same(o->path, ins[j].path))
                spk_fail_all(SPK_EXIT_USAGE, "%s: %s %s is the %s file: writing it would destroy that input", command,
                             o->flag, o->path, ins[j].flag);
        for (int j = 0; j < i; j++)
            if (given(outs[j].path) && out_paths_same(o->path, outs[j].path))
                spk_fail_all(SPK_EXIT_USAGE, "%s: %s %s and %s %s are the same file", command, outs[j].flag,
                             outs[j].path, o->flag, o->path);
        if (!folders) continue;
        char dir[4096];
        folder_of(o->path, dir, sizeof dir);
        struct stat st;
        const int exists = stat(dir, &st) == 0;
        if (!exists || !S_ISDIR(st.st_mode))
            spk_fail_all(SPK_EXIT_USAGE, "%s: %s %s: the folder %s %s", command, o->flag, o->path, dir,
                         exists ? "is not a folder" : "does not exist");
        if (access(dir, W_OK | X_OK) != 0)
            spk_fail_all(SPK_EXIT_USAGE, "%s: %s %s: cannot write into %s (%s)", command, o->flag, o->path, dir,
                         strerror(errno));
    }
}

void out_paths_check(const char *command, const path_arg_t *outs, int n_outs, const path_arg_t *ins, int n_ins) {
    check(command, outs, n_outs, ins, n_ins, 1);
}

void out_paths_check_files(const char *command, const path_arg_t *outs, int n_outs, const path_arg_t *ins, int n_ins) {
    check(command, outs, n_outs, ins, n_ins, 0);
}
