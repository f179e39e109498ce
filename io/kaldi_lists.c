#include "io/kaldi_lists.h"

#include "kernels/base/check.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

static int fail(char *err, size_t cap, const char *fmt, ...) SPK_PRINTF(3, 4);
static int fail(char *err, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return SPK_EXIT_DATA;
}
#define FAIL(...) return fail(err, cap, __VA_ARGS__)

static int cmp_entry(const void *a, const void *b) {
    const kaldi_entry_t *x = *(kaldi_entry_t *const *)a, *y = *(kaldi_entry_t *const *)b;
    int c = strcmp(x->key, y->key);
    return c ? c : x->line < y->line ? -1 : x->line > y->line;
}

// Entries sorted by key (then line), malloc'ed; NULL with err set when a key repeats (the
// repeat that comes earliest in the file is named; kind says what the keys are).
static kaldi_entry_t **sort_keys(const kaldi_list_t *l, const char *kind, char *err, size_t cap) {
    kaldi_entry_t **s = mallocCheck((size_t)(l->n ? l->n : 1) * sizeof *s);
    for (int64_t i = 0; i < l->n; i++) s[i] = &l->e[i];
    qsort(s, (size_t)l->n, sizeof *s, cmp_entry);
    int64_t dup = -1;
    for (int64_t i = 1; i < l->n; i++)
        if (strcmp(s[i - 1]->key, s[i]->key) == 0 && (dup < 0 || s[i]->line < s[dup]->line)) dup = i;
    if (dup < 0) return s;
    int64_t first = dup;
    while (first > 0 && strcmp(s[first - 1]->key, s[dup]->key) == 0) first--;
    snprintf(err, cap, "%s:%lld: duplicate %s '%.200s' (first on line %lld)", l->path, (long long)s[dup]->line, kind, s[dup]->key,
             (long long)s[first]->line);
    free(s);
    return NULL;
}

static const kaldi_entry_t *find_key(kaldi_entry_t **sorted, int64_t n, const char *key) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(sorted[mid]->key, key);
        if (c == 0) return sorted[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

// One line, NUL-terminated in place and trimmed, into key and value.
static int parse_line(char *s, char *e, int64_t lineno, const char *path, const char *form, kaldi_value_t kind,
                      kaldi_entry_t *out, char *err, size_t cap) {
    while (s < e && is_space(*s)) s++;
    while (e > s && is_space(e[-1])) *--e = 0;
    if (s == e) FAIL("%s:%lld: empty line", path, (long long)lineno);
    char *k = s;
    while (s < e && !is_space(*s)) s++;
    if (s < e) *s++ = 0;
    while (s < e && is_space(*s)) s++;
    if (s == e) FAIL("%s:%lld: expected '%s', got only '%.200s'", path, (long long)lineno, form, k);
    if (kind == KALDI_ONE_WORD) {
        char *t = s;
        while (t < e && !is_space(*t)) t++;
        if (t < e) FAIL("%s:%lld: expected '%s', got more words after '%.200s'", path, (long long)lineno, form, k);
    } else if (e[-1] == '|') {
        FAIL("%s:%lld: utterance '%.200s': piped commands ('... |') are not supported; give a file path", path, (long long)lineno, k);
    }
    *out = (kaldi_entry_t){k, s, lineno};
    return 0;
}

int kaldi_list_parse(const char *text, size_t len, const char *path, const char *what, const char *form, kaldi_value_t kind,
                     kaldi_list_t *l, char *err, size_t cap) {
    memset(l, 0, sizeof *l);
    l->path = path;
    if (memchr(text, 0, len)) FAIL("%s: the %s holds NUL bytes (not a text file?)", path, what);
    l->text = mallocCheck(len + 1);
    memcpy(l->text, text, len);
    l->text[len] = 0;
    int64_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    l->e = mallocCheck((size_t)lines * sizeof *l->e);
    char *p = l->text, *end = l->text + len;
    for (int64_t lineno = 1; p < end; lineno++) {
        char *nl = memchr(p, '\n', (size_t)(end - p)), *eol = nl ? nl : end;
        *eol = 0;
        if (parse_line(p, eol, lineno, path, form, kind, &l->e[l->n], err, cap)) {
            kaldi_list_free(l);
            return SPK_EXIT_DATA;
        }
        l->n++;
        p = nl ? nl + 1 : end;
    }
    char key_kind[64];  // the form's first word: "UTTERANCE-ID"
    snprintf(key_kind, sizeof key_kind, "%.*s", (int)strcspn(form, " "), form);
    kaldi_entry_t **sorted = l->n ? sort_keys(l, key_kind, err, cap) : NULL;
    if (l->n == 0 || !sorted) {
        if (l->n == 0) fail(err, cap, "%s: the %s is empty", path, what);
        kaldi_list_free(l);
        return SPK_EXIT_DATA;
    }
    free(sorted);
    return 0;
}

int kaldi_list_read(const char *path, const char *what, const char *form, kaldi_value_t kind, kaldi_list_t *l, char *err,
                    size_t cap) {
    memset(l, 0, sizeof *l);
    FILE *f = fopen(path, "rb");
    if (!f) FAIL("%s: cannot read the %s (%s)", path, what, strerror(errno));
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) spk_die(SPK_EXIT_FAILURE, "out of memory reading %s", path);
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) fwrite(chunk, 1, got, m);
    int bad = ferror(f);
    fclose(f);
    if (fclose(m) != 0) spk_die(SPK_EXIT_FAILURE, "out of memory reading %s", path);
    int rc = bad ? fail(err, cap, "%s: read error in the %s", path, what) : kaldi_list_parse(buf, len, path, what, form, kind, l, err, cap);
    free(buf);
    return rc;
}

void kaldi_list_free(kaldi_list_t *l) {
    free(l->e);
    free(l->text);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Labels from spk2id: every index an integer in [0, speakers), each used once. us: utt2spk's
// entries sorted by key.
static int labels_from_spk2id(const kaldi_list_t *wav, const kaldi_list_t *utt2spk, kaldi_entry_t **us, const kaldi_list_t *s2i,
                              int32_t *labels, int64_t *num_speakers, char *err, size_t cap) {
    const int64_t S = s2i->n;
    int64_t *owner = mallocCheck((size_t)S * sizeof *owner);  // spk2id line index of each speaker index
    for (int64_t s = 0; s < S; s++) owner[s] = -1;
    int rc = 0;
    for (int64_t i = 0; i < S && !rc; i++) {
        const kaldi_entry_t *e = &s2i->e[i];
        char *end = NULL;
        errno = 0;
        long long id = strtoll(e->value, &end, 10);
        if (errno || !end || *end || id < 0 || id >= S)
            rc = fail(err, cap, "%s:%lld: index '%.64s' of speaker '%.200s' is not an integer in [0, %lld) (the %lld speakers of the file)",
                      s2i->path, (long long)e->line, e->value, e->key, (long long)S, (long long)S);
        else if (owner[id] >= 0)
            rc = fail(err, cap, "%s:%lld: index %lld of speaker '%.200s' is already used on line %lld", s2i->path, (long long)e->line,
                      id, e->key, (long long)s2i->e[owner[id]].line);
        else
            owner[id] = i;
    }
    kaldi_entry_t **ss = rc ? NULL : sort_keys(s2i, "SPEAKER-ID", err, cap);
    if (!rc && !ss) rc = SPK_EXIT_DATA;
    for (int64_t i = 0; i < wav->n && !rc; i++) {
        const kaldi_entry_t *u = find_key(us, utt2spk->n, wav->e[i].key), *s = find_key(ss, S, u->value);
        if (!s)
            rc = fail(err, cap, "%s:%lld: speaker '%.200s' of utterance '%.200s' is not in %s", utt2spk->path, (long long)u->line,
                      u->value, u->key, s2i->path);
        else
            labels[i] = (int32_t)strtoll(s->value, NULL, 10);
    }
    free(ss);
    free(owner);
    *num_speakers = S;
    return rc;
}

int kaldi_lists_join(const kaldi_list_t *wav, const kaldi_list_t *utt2spk, const kaldi_list_t *spk2id, int32_t *labels,
                     int64_t *num_speakers, char *err, size_t cap) {
    kaldi_entry_t **ws = sort_keys(wav, "UTTERANCE-ID", err, cap);
    kaldi_entry_t **us = ws ? sort_keys(utt2spk, "UTTERANCE-ID", err, cap) : NULL;
    int rc = us ? 0 : SPK_EXIT_DATA;
    for (int64_t i = 0; i < wav->n && !rc; i++)
        if (!find_key(us, utt2spk->n, wav->e[i].key))
            rc = fail(err, cap, "%s:%lld: utterance '%.200s' has no speaker in %s", wav->path, (long long)wav->e[i].line, wav->e[i].key,
                      utt2spk->path);
    for (int64_t i = 0; i < utt2spk->n && !rc; i++)
        if (!find_key(ws, wav->n, utt2spk->e[i].key))
            rc = fail(err, cap, "%s:%lld: utterance '%.200s' is not in %s", utt2spk->path, (long long)utt2spk->e[i].line,
                      utt2spk->e[i].key, wav->path);
    if (!rc && spk2id) {
        rc = labels_from_spk2id(wav, utt2spk, us, spk2id, labels, num_speakers, err, cap);
    } else if (!rc) {  // sorted distinct speaker names (byte order, as Kaldi's C-locale sort) -> 0..S-1
        char **names = mallocCheck((size_t)utt2spk->n * sizeof *names);
        for (int64_t i = 0; i < utt2spk->n; i++) names[i] = utt2spk->e[i].value;
        qsort(names, (size_t)utt2spk->n, sizeof *names, cmp_str);
        int64_t s = 0;
        for (int64_t i = 0; i < utt2spk->n; i++)
            if (s == 0 || strcmp(names[i], names[s - 1]) != 0) names[s++] = names[i];
        for (int64_t i = 0; i < wav->n; i++) {
            char *key = find_key(us, utt2spk->n, wav->e[i].key)->value;
            labels[i] = (int32_t)((char **)bsearch(&key, names, (size_t)s, sizeof *names, cmp_str) - names);
        }
        *num_speakers = s;
        free(names);
    }
    free(ws);
    free(us);
    return rc;
}
