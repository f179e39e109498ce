#include "io/common/atomic_file.h"

#include "kernels/base/check.h"
#include "kernels/base/stop_signals.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void atomic_temp_path(const char *path, char *out, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (slash)
        snprintf(out, cap, "%.*s/.%s.tmp", (int)(slash - path), path, slash + 1);
    else
        snprintf(out, cap, ".%s.tmp", path);
}

static void dir_of(const char *path, char *out, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, cap, ".");
    else if (slash == path)
        snprintf(out, cap, "/");
    else
        snprintf(out, cap, "%.*s", (int)(slash - path), path);
}

int file_write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        if (w == 0) {  // a device that takes nothing more
            errno = ENOSPC;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

// rename(2) that never replaces: renameat2 where the file system has it, else link + unlink
// (link fails on an existing target).
int atomic_rename_no_replace(const char *from, const char *to) {
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS) return -1;
    if (link(from, to) != 0) return -1;
    unlink(from);
    return 0;
}

// The durable part of a rename is the directory entry; file systems that cannot fsync a
// directory (EINVAL, EROFS) have nothing to flush.
static int fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd) == 0 || errno == EINVAL || errno == EROFS ? 0 : -1;
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

int atomic_write_file(const char *path, const void *buf, size_t n, atomic_mode_t mode, char *err, size_t cap) {
    char tmp[4200], dir[4200];
    atomic_temp_path(path, tmp, sizeof tmp);
    dir_of(path, dir, sizeof dir);
    stop_signals_own_temp(tmp);  // a stop meanwhile removes it
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        stop_signals_disown_temp(tmp);
        snprintf(err, cap, "%s: cannot create %s (%s)", path, tmp, strerror(errno));
        return -1;
    }
    const char *step = NULL;
    if (file_write_all(fd, buf, n) != 0)
        step = "cannot write";
    else if (fsync(fd) != 0)
        step = "cannot flush to disk";
    int e = errno;
    if (close(fd) != 0 && !step) {
        step = "cannot close";
        e = errno;
    }
    if (!step && (mode == ATOMIC_NO_REPLACE ? atomic_rename_no_replace(tmp, path) : rename(tmp, path)) != 0) {
        step = "cannot rename the temp file into place";
        e = errno;
    }
    stop_signals_disown_temp(tmp);
    if (step) {
        unlink(tmp);
        if (e == EEXIST)
            snprintf(err, cap, "%s: already exists, and is left as it is", path);
        else
            snprintf(err, cap, "%s: %s (%s); the temp file is removed, nothing at the target changed", path, step,
                     strerror(e));
        errno = e;
        return -1;
    }
    if (fsync_dir(dir) != 0) {
        snprintf(err, cap, "%s: written, but its directory cannot be flushed to disk (%s)", path, strerror(errno));
        return -1;
    }
    return 0;
}

void atomic_text_open(atomic_text_t *t) {
    t->buf = NULL;
    t->n = 0;
    t->f = open_memstream(&t->buf, &t->n);
    if (!t->f) spk_die(SPK_EXIT_FAILURE, "out of memory for an output file");
}

int atomic_text_commit(atomic_text_t *t, const char *path, char *err, size_t cap) {
    int rc = -1;
    if (fclose(t->f) != 0)
        snprintf(err, cap, "%s: out of memory assembling the file", path);
    else
        rc = atomic_write_file(path, t->buf, t->n, ATOMIC_REPLACE, err, cap);
    free(t->buf);
    memset(t, 0, sizeof *t);
    return rc;
}
