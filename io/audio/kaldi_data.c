#include "io/audio/kaldi_data.h"

#include "kernels/base/check.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reject(kaldi_verdict_t *v, int code, const char *fmt, ...) SPK_PRINTF(3, 4);
static int reject(kaldi_verdict_t *v, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->msg, sizeof v->msg, fmt, ap);
    va_end(ap);
    v->code = code;
    return -1;
}

static void list_free(kaldi_list_t *l) {
    free(l->e);
    free(l->text);
    memset(l, 0, sizeof *l);
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// Reads "KEY REST" lines (`form` names the two fields for messages). two_tokens: REST must
// be one token (utt2spk, spk2id); otherwise REST is the rest of the line, trimmed (wav.scp
// paths may hold spaces). Empty lines are errors.
static int read_list(const char *path, const char *what, const char *form, int two_tokens, kaldi_list_t *l,
                     kaldi_verdict_t *v) {
    memset(l, 0, sizeof *l);
    l->path = path;
    FILE *f = fopen(path, "rb");
    if (!f) return reject(v, SPK_EXIT_DATA, "%s: cannot read the %s (%s)", path, what, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    l->text = mallocCheck(cap + 1);
    for (;;) {
        if (len == cap) {
            cap *= 2;
            char *t = realloc(l->text, cap + 1);
            if (!t) spk_die(SPK_EXIT_FAILURE, "out of memory reading %s", path);
            l->text = t;
        }
        size_t got = fread(l->text + len, 1, cap - len, f);
        if (got == 0) break;
        len += got;
    }
    int rd_err = ferror(f);
    fclose(f);
    if (rd_err) return reject(v, SPK_EXIT_DATA, "%s: read error in the %s", path, what);
    l->text[len] = 0;
    if (memchr(l->text, 0, len))
        return reject(v, SPK_EXIT_DATA, "%s: the %s holds NUL bytes (not a text file?)", path, what);
    int64_t lines = 0;
    for (size_t i = 0; i < len; i++) lines += l->text[i] == '\n';
    l->e = mallocCheck((size_t)(lines + 1) * sizeof(kaldi_entry_t));
    char *p = l->text, *end = l->text + len;
    int64_t lineno = 0;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *eol = nl ? nl : end;
        *eol = 0;
        lineno++;
        char *s = p, *e = eol;
        while (s < e && is_space(*s)) s++;
        while (e > s && is_space(e[-1])) *--e = 0;
        if (s == e) return reject(v, SPK_EXIT_DATA, "%s:%lld: empty line in the %s", path, (long long)lineno, what);
        char *k = s;
        while (s < e && !is_space(*s)) s++;
        if (s < e) *s++ = 0;
        while (s < e && is_space(*s)) s++;
        if (s == e)
            return reject(v, SPK_EXIT_DATA, "%s:%lld: expected '%s', got only '%s'", path, (long long)lineno, form, k);
        if (two_tokens) {
            char *t = s;
            while (t < e && !is_space(*t)) t++;
            if (t < e)
                return reject(v, SPK_EXIT_DATA, "%s:%lld: expected '%s', got more fields after '%s %s'", path,
                              (long long)lineno, form, k, (*t = 0, s));
        }
        l->e[l->n] = (kaldi_entry_t){k, s, lineno, l->n};
        l->n++;
        p = nl ? nl + 1 : end;
    }
    if (l->n == 0) return reject(v, SPK_EXIT_DATA, "%s: the %s is empty", path, what);
    return 0;
}

int kaldi_list_read(const char *path, const char *what, const char *form, kaldi_list_t *l, kaldi_verdict_t *v) {
    memset(v, 0, sizeof *v);
    if (read_list(path, what, form, 1, l, v) == 0) return 0;
    list_free(l);
    return -1;
}

void kaldi_list_free(kaldi_list_t *l) { list_free(l); }

static int cmp_key(const void *a, const void *b) {
    const kaldi_entry_t *x = *(kaldi_entry_t *const *)a, *y = *(kaldi_entry_t *const *)b;
    int c = strcmp(x->key, y->key);
    if (c) return c;
    return x->line < y->line ? -1 : x->line > y->line;
}

// Pointers to the entries sorted by key (then line). Reports the duplicate key that
// appears earliest in the file.
static kaldi_entry_t **sorted_keys(kaldi_list_t *l, const char *kind, kaldi_verdict_t *v) {
    kaldi_entry_t **s = mallocCheck((size_t)l->n * sizeof(kaldi_entry_t *));
    for (int64_t i = 0; i < l->n; i++) s[i] = &l->e[i];
    qsort(s, (size_t)l->n, sizeof *s, cmp_key);
    const kaldi_entry_t *dup = NULL, *first = NULL;
    for (int64_t i = 1; i < l->n; i++)
        if (strcmp(s[i - 1]->key, s[i]->key) == 0 && (!dup || s[i]->line < dup->line)) dup = s[i];
    if (dup) {
        // The first occurrence of that key is the smallest line among equal keys.
        for (int64_t i = 0; i < l->n; i++)
            if (strcmp(s[i]->key, dup->key) == 0) {
                first = s[i];
                break;
            }
        reject(v, SPK_EXIT_DATA, "%s:%lld: duplicate %s '%s' (first on line %lld)", l->path, (long long)dup->line, kind,
               dup->key, (long long)first->line);
        free(s);
        return NULL;
    }
    return s;
}

static kaldi_entry_t *find_key(kaldi_entry_t **sorted, int64_t n, const char *key) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(sorted[mid]->key, key);
        if (c == 0) return sorted[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

// "RECORDING-ID START END" of a segments line: a recording of wav.scp, 0 <= START < END
// seconds (END -1: to the end of the recording).
static int parse_segment(const kaldi_entry_t *e, const char *path, kaldi_entry_t **recs, int64_t num_recs,
                         kaldi_span_t *sp, kaldi_verdict_t *v) {
    char rec[512], tail;
    double start, end;
    if (sscanf(e->value, "%511s %lf %lf %c", rec, &start, &end, &tail) != 3)
        return reject(v, SPK_EXIT_DATA, "%s:%lld: expected 'UTTERANCE-ID RECORDING-ID START END', got '%s %s'", path,
                      (long long)e->line, e->key, e->value);
    const kaldi_entry_t *r = find_key(recs, num_recs, rec);
    if (!r)
        return reject(v, SPK_EXIT_DATA, "%s:%lld: recording '%s' of utterance '%s' is not in the wav.scp", path,
                      (long long)e->line, rec, e->key);
    if (!(start >= 0.0) || !(end > start || end == -1.0))
        return reject(v, SPK_EXIT_DATA,
                      "%s:%lld: utterance '%s': start %g and end %g seconds are not 0 <= start < end (or end -1)", path,
                      (long long)e->line, e->key, start, end);
    sp->source = r->value;
    sp->start = start;
    sp->end = end;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int parse_lists(kaldi_data_t *L, const char *wav_scp, const char *segments, const char *utt2spk,
                       const char *spk2id, kaldi_verdict_t *v) {
    memset(L, 0, sizeof *L);
    if (read_list(wav_scp, "wav.scp", "UTTERANCE-ID PATH", 0, &L->wav, v)) return -1;
    const int has_seg = segments && segments[0];
    if (has_seg && read_list(segments, "segments", "UTTERANCE-ID RECORDING-ID START END", 0, &L->seg, v)) return -1;
    if (read_list(utt2spk, "utt2spk", "UTTERANCE-ID SPEAKER-ID", 1, &L->u2s, v)) return -1;
    // The utterances: segments' lines, or wav.scp's.
    kaldi_list_t *ul = has_seg ? &L->seg : &L->wav;
    L->listed_in = ul->path;
    kaldi_entry_t **ws = sorted_keys(&L->wav, has_seg ? "recording id" : "utterance id", v);
    if (!ws) return -1;
    kaldi_entry_t **ss_u = has_seg ? sorted_keys(&L->seg, "utterance id", v) : ws;
    kaldi_entry_t **us = ss_u ? sorted_keys(&L->u2s, "utterance id", v) : NULL;
    if (!us) {
        if (ss_u != ws) free(ss_u);
        free(ws);
        return -1;
    }
    int rc = -1;
    kaldi_entry_t **spk_of = mallocCheck((size_t)ul->n * sizeof(kaldi_entry_t *));
    for (int64_t i = 0; i < ul->n; i++) {
        spk_of[i] = find_key(us, L->u2s.n, ul->e[i].key);
        if (!spk_of[i]) {
            reject(v, SPK_EXIT_DATA, "%s:%lld: utterance '%s' has no speaker in %s", ul->path, (long long)ul->e[i].line,
                   ul->e[i].key, utt2spk);
            goto out;
        }
    }
    for (int64_t i = 0; i < L->u2s.n; i++)
        if (!find_key(ss_u, ul->n, L->u2s.e[i].key)) {
            reject(v, SPK_EXIT_DATA, "%s:%lld: utterance '%s' is not in %s", utt2spk, (long long)L->u2s.e[i].line,
                   L->u2s.e[i].key, ul->path);
            goto out;
        }
    L->n = ul->n;
    L->utt = mallocCheck((size_t)L->n * sizeof(char *));
    L->span = mallocCheck((size_t)L->n * sizeof(kaldi_span_t));
    L->label = mallocCheck((size_t)L->n * sizeof(int32_t));
    for (int64_t i = 0; i < L->n; i++) {
        L->utt[i] = ul->e[i].key;
        L->span[i] = (kaldi_span_t){ul->e[i].value, 0.0, -1.0, ul->e[i].line};
        if (has_seg && parse_segment(&ul->e[i], segments, ws, L->wav.n, &L->span[i], v)) goto out;
    }
    if (spk2id && spk2id[0]) {
        if (read_list(spk2id, "spk2id", "SPEAKER-ID INDEX", 1, &L->s2i, v)) goto out;
        kaldi_entry_t **ss = sorted_keys(&L->s2i, "speaker id", v);
        if (!ss) goto out;
        L->num_speakers = L->s2i.n;
        L->speakers = callocCheck((size_t)L->num_speakers, sizeof(char *));
        for (int64_t i = 0; i < L->s2i.n; i++) {
            kaldi_entry_t *e = &L->s2i.e[i];
            char *endp = NULL;
            errno = 0;
            long long id = strtoll(e->value, &endp, 10);
            if (errno || !endp || *endp || id < 0 || id >= L->num_speakers) {
                reject(v, SPK_EXIT_DATA,
                       "%s:%lld: index '%s' of speaker '%s' is not an integer in [0, %lld) (the %lld speakers of the "
                       "file)",
                       spk2id, (long long)e->line, e->value, e->key, (long long)L->num_speakers,
                       (long long)L->num_speakers);
                free(ss);
                goto out;
            }
            if (L->speakers[id]) {
                int64_t first = 0;
                for (int64_t j = 0; j < i; j++)
                    if (strtoll(L->s2i.e[j].value, NULL, 10) == id) {
                        first = L->s2i.e[j].line;
                        break;
                    }
                reject(v, SPK_EXIT_DATA, "%s:%lld: index %lld of speaker '%s' is already used on line %lld", spk2id,
                       (long long)e->line, id, e->key, (long long)first);
                free(ss);
                goto out;
            }
            L->speakers[id] = e->key;
            e->index = id;
        }
        for (int64_t i = 0; i < L->n; i++) {
            kaldi_entry_t *se = find_key(ss, L->s2i.n, spk_of[i]->value);
            if (!se) {
                reject(v, SPK_EXIT_DATA, "%s:%lld: speaker '%s' of utterance '%s' is not in %s", utt2spk,
                       (long long)spk_of[i]->line, spk_of[i]->value, spk_of[i]->key, spk2id);
                free(ss);
                goto out;
            }
            L->label[i] = (int32_t)se->index;
        }
        free(ss);
    } else {
        // Sorted distinct speaker names (byte order, as Kaldi's C-locale sort) -> 0..S-1.
        char **names = mallocCheck((size_t)L->u2s.n * sizeof(char *));
        for (int64_t i = 0; i < L->u2s.n; i++) names[i] = L->u2s.e[i].value;
        qsort(names, (size_t)L->u2s.n, sizeof *names, cmp_str);
        int64_t s = 0;
        for (int64_t i = 0; i < L->u2s.n; i++)
            if (i == 0 || strcmp(names[i], names[s - 1]) != 0) names[s++] = names[i];
        if (s > INT32_MAX) {
            free(names);
            reject(v, SPK_EXIT_DATA, "%s: %lld speakers do not fit int32 labels", utt2spk, (long long)s);
            goto out;
        }
        L->num_speakers = s;
        L->speakers = names;
        for (int64_t i = 0; i < L->n; i++) {
            char *key = spk_of[i]->value, **hit = bsearch(&key, names, (size_t)s, sizeof *names, cmp_str);
            L->label[i] = (int32_t)(hit - names);
        }
    }
    rc = 0;
out:
    free(spk_of);
    if (ss_u != ws) free(ss_u);
    free(ws);
    free(us);
    return rc;
}

int kaldi_data_read(kaldi_data_t *d, const char *wav_scp, const char *segments, const char *utt2spk, const char *spk2id,
                    kaldi_verdict_t *v) {
    memset(v, 0, sizeof *v);
    return parse_lists(d, wav_scp, segments, utt2spk, spk2id, v);
}

void kaldi_data_free(kaldi_data_t *d) {
    free(d->utt);
    free(d->span);
    free(d->label);
    free(d->speakers);
    list_free(&d->wav);
    list_free(&d->seg);
    list_free(&d->u2s);
    list_free(&d->s2i);
    memset(d, 0, sizeof *d);
}

const char *kaldi_pipe_command(const char *source, char *buf, size_t cap) {
    size_t n = strlen(source);
    if (n == 0 || source[n - 1] != '|') return NULL;
    n--;
    while (n > 0 && (source[n - 1] == ' ' || source[n - 1] == '\t')) n--;
    snprintf(buf, cap, "%.*s", (int)n, source);
    return buf;
}
