#include "io/scores/trials.h"

#include "kernels/base/check.h"

#include <stdlib.h>
#include <string.h>

static void *grow(void *p, size_t bytes) {
    void *g = realloc(p, bytes);
    if (!g) spk_die(SPK_EXIT_FAILURE, "out of memory reading trials");
    return g;
}

// Appends a trial and the line it came from.
static void push(trials_t *t, int64_t **lines, int64_t a, int64_t b, uint8_t target, int64_t line) {
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1024;
        t->a = grow(t->a, (size_t)t->cap * sizeof(int64_t));
        t->b = grow(t->b, (size_t)t->cap * sizeof(int64_t));
        t->target = grow(t->target, (size_t)t->cap);
        *lines = grow(*lines, (size_t)t->cap * sizeof(int64_t));
    }
    (*lines)[t->n] = line;
    t->a[t->n] = a;
    t->b[t->n] = b;
    t->target[t->n++] = target;
}

// Splits line at whitespace into at most max words (NUL-terminated in place); the count.
static int split(char *line, char **w, int max) {
    int n = 0;
    for (char *p = line; *p;) {
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n' || *p == '\v' || *p == '\f') *p++ = 0;
        if (!*p) break;
        if (n == max) return max + 1;
        w[n++] = p;
        while (*p && !(*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n' || *p == '\v' || *p == '\f')) p++;
    }
    return n;
}

typedef struct {
    int64_t lo, hi, line;
} pair_t;

static int cmp_pair(const void *x, const void *y) {
    const pair_t *a = x, *b = y;
    if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
    if (a->hi != b->hi) return a->hi < b->hi ? -1 : 1;
    return a->line < b->line ? -1 : a->line > b->line;
}

// The same two utterances in two lines (either order): ambiguous, and counted twice.
static int find_repeat(const trials_t *t, const int64_t *lines, const char *path, char *err, size_t cap) {
    pair_t *p = mallocCheck((size_t)t->n * sizeof *p);
    for (int64_t i = 0; i < t->n; i++)
        p[i] = (pair_t){t->a[i] < t->b[i] ? t->a[i] : t->b[i], t->a[i] < t->b[i] ? t->b[i] : t->a[i], lines[i]};
    qsort(p, (size_t)t->n, sizeof *p, cmp_pair);
    int rc = 0;
    for (int64_t i = 1; i < t->n && !rc; i++)
        if (p[i].lo == p[i - 1].lo && p[i].hi == p[i - 1].hi) {
            snprintf(err, cap, "%s:%lld: the pair of line %lld again: each pair of utterances is one trial", path,
                     (long long)p[i].line, (long long)p[i - 1].line);
            rc = SPK_EXIT_DATA;
        }
    free(p);
    return rc;
}

#define FAIL(...)                        \
    do {                                 \
        snprintf(err, cap, __VA_ARGS__); \
        rc = SPK_EXIT_DATA;              \
        goto done;                       \
    } while (0)

// The two line formats; a list keeps to one.
enum { FORMAT_LABEL_LAST = 1, FORMAT_VOXCELEB = 2 };
static const char *format_name(int format) {
    return format == FORMAT_VOXCELEB ? "VoxCeleb's '1|0 utt1 utt2'" : "'utt1 utt2 target|nontarget'";
}

int trials_parse(FILE *f, const char *path, const utt_index_t *ix, const char *ids_from, trials_t *t, char *err,
                 size_t cap) {
    memset(t, 0, sizeof *t);
    char *line = NULL;
    size_t linecap = 0;
    ssize_t len;
    int64_t lineno = 0, *lines = NULL, targets = 0, format_line = 0;
    int rc = 0, format = 0;
    while ((len = getline(&line, &linecap, f)) > 0) {
        lineno++;
        if ((size_t)len != strlen(line))
            FAIL("%s:%lld: holds a NUL byte (not a text trial list)", path, (long long)lineno);
        char *w[3];
        int k = split(line, w, 3);
        if (k == 0) continue;
        if (k != 3)
            FAIL("%s:%lld: expected 'utt1 utt2 target|nontarget' or '1|0 utt1 utt2' (VoxCeleb), got %s", path,
                 (long long)lineno, k > 3 ? "more words" : "fewer words");
        int is_t = strcmp(w[2], "target") == 0, is_n = strcmp(w[2], "nontarget") == 0;
        const int vox = !is_t && !is_n && (strcmp(w[0], "1") == 0 || strcmp(w[0], "0") == 0);
        if (!is_t && !is_n && !vox)
            FAIL("%s:%lld: label '%.64s' must be 'target' or 'nontarget' (or the line VoxCeleb's '1|0 utt1 utt2')",
                 path, (long long)lineno, w[2]);
        const int line_format = vox ? FORMAT_VOXCELEB : FORMAT_LABEL_LAST;
        if (format && line_format != format)
            FAIL("%s:%lld: a line in %s format after line %lld in %s format; one format per list", path,
                 (long long)lineno, format_name(line_format), (long long)format_line, format_name(format));
        if (!format) format = line_format, format_line = lineno;
        if (vox) is_t = w[0][0] == '1';
        const char *ua = vox ? w[1] : w[0], *ub = vox ? w[2] : w[1];
        int64_t a = utt_index_find(ix, ua), b = utt_index_find(ix, ub);
        if (a < 0 || b < 0)
            FAIL("%s:%lld: utterance '%.200s' is not in %.600s", path, (long long)lineno, a < 0 ? ua : ub, ids_from);
        if (a == b) FAIL("%s:%lld: utterance '%.200s' is tried against itself", path, (long long)lineno, ua);
        push(t, &lines, a, b, (uint8_t)is_t, lineno);
        targets += is_t;
    }
    if (ferror(f)) FAIL("%s: cannot read the trials", path);
    if (t->n == 0) FAIL("%s: no trials", path);
    if (targets == 0 || targets == t->n)
        FAIL("%s: all %lld trials are %s; EER and minDCF need both target and nontarget trials", path, (long long)t->n,
             targets ? "target" : "nontarget");
    rc = find_repeat(t, lines, path, err, cap);
done:
    free(line);
    free(lines);
    if (rc) trials_free(t);
    return rc;
}

void trials_free(trials_t *t) {
    free(t->a);
    free(t->b);
    free(t->target);
    memset(t, 0, sizeof *t);
}
