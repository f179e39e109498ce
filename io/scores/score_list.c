#include "io/scores/score_list.h"

#include "kernels/base/check.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WORDS 16

static int reject(char *err, size_t cap, const char *fmt, ...) SPK_PRINTF(3, 4);
static int reject(char *err, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return SPK_EXIT_DATA;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// Splits a line at whitespace in place; the word count (MAX_WORDS + 1: too many).
static int split(char *s, char **w) {
    int n = 0;
    while (*s) {
        while (is_space(*s)) *s++ = 0;
        if (!*s) break;
        if (n == MAX_WORDS) return MAX_WORDS + 1;
        w[n++] = s;
        while (*s && !is_space(*s)) s++;
    }
    return n;
}

static int read_text(const char *path, char **text, size_t *len, char *err, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return reject(err, cap, "%s: cannot read the scores (%s)", path, strerror(errno));
    size_t size = 1 << 16, n = 0;
    char *buf = mallocCheck(size + 1);
    for (size_t got; (got = fread(buf + n, 1, size - n, f)) > 0;) {
        n += got;
        if (n == size) {
            char *g = realloc(buf, 2 * size + 1);
            if (!g) spk_die(SPK_EXIT_FAILURE, "out of memory reading %s", path);
            buf = g;
            size *= 2;
        }
    }
    const int bad = ferror(f);
    fclose(f);
    buf[n] = 0;
    *text = buf;
    *len = n;
    return bad ? reject(err, cap, "%s: cannot read the scores (a directory?)", path) : 0;
}

static void grow(score_list_t *l, int64_t *cap) {
    if (l->n < *cap) return;
    *cap = *cap ? 2 * *cap : 1024;
    l->a = realloc(l->a, (size_t)*cap * sizeof *l->a);
    l->b = realloc(l->b, (size_t)*cap * sizeof *l->b);
    l->score = realloc(l->score, (size_t)*cap * sizeof *l->score);
    l->target = realloc(l->target, (size_t)*cap);
    if (!l->a || !l->b || !l->score || !l->target) spk_die(SPK_EXIT_FAILURE, "out of memory reading scores");
}

static int parse(score_list_t *l, const char *path, int field, size_t len, char *err, size_t cap) {
    if (memchr(l->text, 0, len)) return reject(err, cap, "%s: holds a NUL byte (not a text score list)", path);
    int64_t lineno = 0, first_line = 0, alloc = 0;
    for (char *p = l->text, *end = l->text + len; p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p)), *eol = nl ? nl : end;
        *eol = 0;
        lineno++;
        char *w[MAX_WORDS];
        const int k = split(p, w);
        p = nl ? nl + 1 : end;
        if (k == 0) continue;
        if (k < 3 || k > MAX_WORDS)
            return reject(err, cap, "%s:%lld: expected 'utt1 utt2 score [score ...] [target|nontarget]', got %s", path,
                          (long long)lineno, k < 3 ? "fewer words" : "more words");
        const int is_t = !strcmp(w[k - 1], "target"), labelled = is_t || !strcmp(w[k - 1], "nontarget");
        if (!first_line) first_line = lineno, l->labelled = labelled;
        if (labelled != l->labelled)
            return reject(err, cap, "%s:%lld: %s a label, but line %lld %s; label every line or none", path,
                          (long long)lineno, labelled ? "has" : "lacks", (long long)first_line,
                          labelled ? "has none" : "has one");
        const int numbers = k - 2 - labelled, f = field ? field : 2 + numbers;  // awk's field number
        if (numbers < 1)
            return reject(err, cap, "%s:%lld: no score after the two utterance ids", path, (long long)lineno);
        if (f > 2 + numbers)
            return reject(err, cap, "%s:%lld: field %d is not a score (the line has %d)", path, (long long)lineno, f,
                          numbers);
        char *e = NULL;
        errno = 0;
        const double x = strtod(w[f - 1], &e);
        if (errno || e == w[f - 1] || *e || !isfinite(x))
            return reject(err, cap, "%s:%lld: field %d '%.64s' is not a finite number", path, (long long)lineno, f,
                          w[f - 1]);
        if (!l->n) l->field = f;
        grow(l, &alloc);
        l->a[l->n] = w[0];
        l->b[l->n] = w[1];
        l->score[l->n] = x;
        l->target[l->n++] = (uint8_t)is_t;
    }
    return l->n ? 0 : reject(err, cap, "%s: no scores", path);
}

int score_list_read(const char *path, int field, score_list_t *l, char *err, size_t cap) {
    memset(l, 0, sizeof *l);
    size_t len = 0;
    int rc = read_text(path, &l->text, &len, err, cap);
    if (!rc) rc = parse(l, path, field, len, err, cap);
    if (rc) score_list_free(l);
    return rc;
}

void score_list_free(score_list_t *l) {
    free(l->a);
    free(l->b);
    free(l->score);
    free(l->target);
    free(l->text);
    memset(l, 0, sizeof *l);
}
