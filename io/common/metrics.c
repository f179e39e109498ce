#include "io/common/metrics.h"

#include "io/common/atomic_file.h"
#include "kernels/base/check.h"
#include "kernels/base/stop_signals.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void put(json_line_t *j, const char *fmt, const char *key, const char *val) {
    int w = snprintf(j->buf + j->len, sizeof j->buf - j->len, fmt, j->len > 1 ? ", " : "", key, val);
    if (w > 0 && (size_t)w < sizeof j->buf - j->len) j->len += (size_t)w;
}

void json_begin(json_line_t *j) { j->len = (size_t)snprintf(j->buf, sizeof j->buf, "{"); }

void json_int(json_line_t *j, const char *key, int64_t v) {
    char s[32];
    snprintf(s, sizeof s, "%lld", (long long)v);
    put(j, "%s\"%s\": %s", key, s);
}

void json_num(json_line_t *j, const char *key, double v) {
    char s[32];
    if (isfinite(v))
        snprintf(s, sizeof s, "%.9g", v);
    else
        snprintf(s, sizeof s, "null");
    put(j, "%s\"%s\": %s", key, s);
}

void json_end(json_line_t *j) {
    if (j->len + 2 < sizeof j->buf) {
        j->buf[j->len++] = '}';
        j->buf[j->len] = 0;
    }
}

// One whole line or none: a write that fails part-way (a full disk) is cut back to where the
// file ended, so readers never meet half a line.
void metrics_append(const char *path, const json_line_t *j) {
    const int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) spk_die(SPK_EXIT_FAILURE, "%s: cannot open the metrics file (%s)", path, strerror(errno));
    struct stat st;
    const off_t end = fstat(fd, &st) == 0 ? st.st_size : -1;
    const int bad =
        file_write_all(fd, j->buf, strlen(j->buf)) != 0 || file_write_all(fd, "\n", 1) != 0 || fsync(fd) != 0;
    const int e = errno;
    if (bad) {
        const int cut = end >= 0 && ftruncate(fd, end) == 0;
        close(fd);
        spk_die(SPK_EXIT_FAILURE, "%s: cannot write the metrics file (%s)%s", path, strerror(e),
                cut ? "; the file is as it was before this line" : "");
    }
    close(fd);
}

int64_t metrics_file_foreign(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int64_t lineno = 0, bad = 0;
    while (!bad && (n = getline(&line, &cap, f)) > 0) {
        lineno++;
        if (line[0] != '{' || strlen(line) != (size_t)n) bad = lineno;  // (a NUL byte: not text)
    }
    free(line);
    fclose(f);
    return bad;
}

// The integer value of "key" in a JSON line, or -1.
static int64_t line_value(const char *line, const char *key) {
    char pattern[64];
    const int n = snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *p = strstr(line, pattern);
    return p ? strtoll(p + n, NULL, 10) : -1;
}

// Keeps the whole lines whose "key" is in [0, limit) (atomic rewrite).
static void keep_below(const char *path, const char *key, int64_t limit) {
    FILE *in = fopen(path, "r");
    if (!in) return;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    stop_signals_own_temp(tmp);
    FILE *out = fopen(tmp, "w");
    if (!out) spk_die(SPK_EXIT_FAILURE, "%s: cannot rewrite the metrics file (%s)", tmp, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, in)) > 0) {
        int64_t v = line_value(line, key);
        if (v >= 0 && v < limit && line[n - 1] == '\n') fputs(line, out);
    }
    free(line);
    fclose(in);
    if (fflush(out) != 0 || fsync(fileno(out)) != 0)
        spk_die(SPK_EXIT_FAILURE, "%s: cannot write the metrics file (%s)", tmp, strerror(errno));
    fclose(out);
    if (rename(tmp, path) != 0)
        spk_die(SPK_EXIT_FAILURE, "%s: cannot replace the metrics file (%s)", path, strerror(errno));
    stop_signals_disown_temp(tmp);
}

void metrics_truncate_from(const char *path, int64_t epoch) { keep_below(path, "epoch", epoch); }

void metrics_truncate_after_step(const char *path, int64_t global_step) {
    keep_below(path, "global_step", global_step + 1);
}
