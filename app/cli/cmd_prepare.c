// `spkddp prepare`: Kaldi-style lists (wav.scp, utt2spk) -> a variable-length feature dataset
// of log mel filterbanks (docs/features.md, docs/dataset-format.md), computed in parallel.
//
//   1. rank 0 reads and checks the lists; the verdict is broadcast, so a bad list gives one
//      line naming the file and line and every rank exits with code 3;
//   2. rank 0 broadcasts the utterance list; rank r takes the contiguous block
//      [N r / K, N (r + 1) / K) in wav.scp order, decodes each file and computes its fbank;
//   3. the first utterance (in wav.scp order) that failed on any rank is found with an
//      allreduce, its rank broadcasts the reason, and every rank stops with code 3;
//   4. MPI_Exscan over the ranks' frame totals gives each rank its first row; the ranks
//      create OUT.tmp collectively through MPI-IO and each writes its own rows of /features
//      with collective writes;
//   5. rank 0 reopens OUT.tmp serially, adds /offsets, /labels, /utt_ids, /speakers and the
//      root attributes (variable-length strings cannot be written through MPI-IO), and
//      renames it to OUT.
#include "kernels/base/check.h"
#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "io/audio.h"
#include "io/dataset.h"
#include "io/fbank.h"
#include "io/h5util.h"
#include "kernels/base/clock.h"

#include <errno.h>
#include <stdarg.h>
#include <hdf5.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    char wav_scp[OPT_STR_MAX];
    char utt2spk[OPT_STR_MAX];
    char spk2id[OPT_STR_MAX];
    char out[OPT_STR_MAX];
    int64_t num_bins, sample_rate, channel, seed;
    double dither;
} prepare_opts_t;

#define F(field) offsetof(prepare_opts_t, field)
static const opt_t opts[] = {
    {"wav-scp", OPT_STR, F(wav_scp), 0, 0, NULL, "Kaldi wav.scp: 'UTTERANCE-ID PATH' per line (any format libsndfile reads)"},
    {"utt2spk", OPT_STR, F(utt2spk), 0, 0, NULL, "Kaldi utt2spk: 'UTTERANCE-ID SPEAKER-ID' per line"},
    {"out", OPT_STR, F(out), 0, 0, NULL, "output feature dataset (HDF5, written as OUT.tmp then renamed)"},
    {"num-mel-bins", OPT_INT, F(num_bins), 3, 1024, NULL, "mel filterbank bins = feature_dim (default 80)"},
    {"spk2id", OPT_STR, F(spk2id), 0, 0, NULL, "'SPEAKER-ID INDEX' per line, indices 0..S-1 (default: sorted speaker names)"},
    {"sample-rate", OPT_INT, F(sample_rate), 1000, 384000, NULL, "resample audio to this rate before the fbank (default 16000)"},
    {"channel", OPT_INT, F(channel), -1, 1023, NULL, "channel of multi-channel files (default 0, as Kaldi; -1 averages)"},
    {"dither", OPT_REAL, F(dither), 0, 1e6, NULL, "Gaussian dither in 16-bit sample units (default 0; Kaldi's is 1)"},
    {"seed", OPT_INT, F(seed), 0, 9e15, NULL, "dither seed (noise is keyed on seed and utterance index)"},
};
static const opt_table_t table = {"prepare", "Compute log mel filterbanks of Kaldi-style lists into a feature dataset.", opts,
                                  (int)(sizeof opts / sizeof opts[0])};

// ---- list parsing (rank 0) ----------------------------------------------------------------

typedef struct {
    int code;
    char msg[1536];
} verdict_t;

static int reject(verdict_t *v, int code, const char *fmt, ...) SPK_PRINTF(3, 4);
static int reject(verdict_t *v, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->msg, sizeof v->msg, fmt, ap);
    va_end(ap);
    v->code = code;
    return -1;
}

// One "KEY VALUE" line of a list file.
typedef struct {
    char *key, *value;
    int64_t line;   // 1-based
    int64_t index;  // position among the entries of its file
} entry_t;

typedef struct {
    const char *path;
    entry_t *e;
    int64_t n;
    char *text;  // owns the strings
} list_t;

static void list_free(list_t *l) {
    free(l->e);
    free(l->text);
    memset(l, 0, sizeof *l);
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// Reads "KEY REST" lines (`form` names the two fields for messages). two_tokens: REST must
// be one token (utt2spk, spk2id); otherwise REST is the rest of the line, trimmed (wav.scp
// paths may hold spaces). Empty lines are errors.
static int read_list(const char *path, const char *what, const char *form, int two_tokens, list_t *l, verdict_t *v) {
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
    if (memchr(l->text, 0, len)) return reject(v, SPK_EXIT_DATA, "%s: the %s holds NUL bytes (not a text file?)", path, what);
    int64_t lines = 0;
    for (size_t i = 0; i < len; i++) lines += l->text[i] == '\n';
    l->e = mallocCheck((size_t)(lines + 1) * sizeof(entry_t));
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
        } else if (e[-1] == '|') {
            return reject(v, SPK_EXIT_DATA, "%s:%lld: utterance '%s': piped commands ('... |') are not supported; give a file path",
                          path, (long long)lineno, k);
        }
        l->e[l->n] = (entry_t){k, s, lineno, l->n};
        l->n++;
        p = nl ? nl + 1 : end;
    }
    if (l->n == 0) return reject(v, SPK_EXIT_DATA, "%s: the %s is empty", path, what);
    return 0;
}

static int cmp_key(const void *a, const void *b) {
    const entry_t *x = *(entry_t *const *)a, *y = *(entry_t *const *)b;
    int c = strcmp(x->key, y->key);
    if (c) return c;
    return x->line < y->line ? -1 : x->line > y->line;
}

// Pointers to the entries sorted by key (then line). Reports the duplicate key that
// appears earliest in the file.
static entry_t **sorted_keys(list_t *l, const char *kind, verdict_t *v) {
    entry_t **s = mallocCheck((size_t)l->n * sizeof(entry_t *));
    for (int64_t i = 0; i < l->n; i++) s[i] = &l->e[i];
    qsort(s, (size_t)l->n, sizeof *s, cmp_key);
    const entry_t *dup = NULL, *first = NULL;
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

static entry_t *find_key(entry_t **sorted, int64_t n, const char *key) {
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

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// What rank 0 learns from the lists.
typedef struct {
    int64_t n;          // utterances, in wav.scp order
    char **utt, **path; // into the wav.scp text
    int64_t *line;      // wav.scp line of each utterance
    int32_t *label;
    int64_t num_speakers;
    char **speakers;    // (num_speakers,) names by label
    list_t wav, u2s, s2i;
} lists_t;

static int parse_lists(const prepare_opts_t *o, lists_t *L, verdict_t *v) {
    memset(L, 0, sizeof *L);
    if (read_list(o->wav_scp, "wav.scp", "UTTERANCE-ID PATH", 0, &L->wav, v)) return -1;
    if (read_list(o->utt2spk, "utt2spk", "UTTERANCE-ID SPEAKER-ID", 1, &L->u2s, v)) return -1;
    entry_t **ws = sorted_keys(&L->wav, "utterance id", v);
    if (!ws) return -1;
    entry_t **us = sorted_keys(&L->u2s, "utterance id", v);
    if (!us) {
        free(ws);
        return -1;
    }
    int rc = -1;
    entry_t **spk_of = mallocCheck((size_t)L->wav.n * sizeof(entry_t *));
    for (int64_t i = 0; i < L->wav.n; i++) {
        spk_of[i] = find_key(us, L->u2s.n, L->wav.e[i].key);
        if (!spk_of[i]) {
            reject(v, SPK_EXIT_DATA, "%s:%lld: utterance '%s' has no speaker in %s", o->wav_scp, (long long)L->wav.e[i].line,
                   L->wav.e[i].key, o->utt2spk);
            goto out;
        }
    }
    for (int64_t i = 0; i < L->u2s.n; i++)
        if (!find_key(ws, L->wav.n, L->u2s.e[i].key)) {
            reject(v, SPK_EXIT_DATA, "%s:%lld: utterance '%s' is not in %s", o->utt2spk, (long long)L->u2s.e[i].line,
                   L->u2s.e[i].key, o->wav_scp);
            goto out;
        }
    L->n = L->wav.n;
    L->utt = mallocCheck((size_t)L->n * sizeof(char *));
    L->path = mallocCheck((size_t)L->n * sizeof(char *));
    L->line = mallocCheck((size_t)L->n * sizeof(int64_t));
    L->label = mallocCheck((size_t)L->n * sizeof(int32_t));
    for (int64_t i = 0; i < L->n; i++) {
        L->utt[i] = L->wav.e[i].key;
        L->path[i] = L->wav.e[i].value;
        L->line[i] = L->wav.e[i].line;
    }
    if (o->spk2id[0]) {
        if (read_list(o->spk2id, "spk2id", "SPEAKER-ID INDEX", 1, &L->s2i, v)) goto out;
        entry_t **ss = sorted_keys(&L->s2i, "speaker id", v);
        if (!ss) goto out;
        L->num_speakers = L->s2i.n;
        L->speakers = callocCheck((size_t)L->num_speakers, sizeof(char *));
        for (int64_t i = 0; i < L->s2i.n; i++) {
            entry_t *e = &L->s2i.e[i];
            char *endp = NULL;
            errno = 0;
            long long id = strtoll(e->value, &endp, 10);
            if (errno || !endp || *endp || id < 0 || id >= L->num_speakers) {
                reject(v, SPK_EXIT_DATA, "%s:%lld: index '%s' of speaker '%s' is not an integer in [0, %lld) (the %lld speakers of the file)",
                       o->spk2id, (long long)e->line, e->value, e->key, (long long)L->num_speakers, (long long)L->num_speakers);
                free(ss);
                goto out;
            }
            if (L->speakers[id]) {
                int64_t first = 0;
                for (int64_t j = 0; j < i; j++)
                    if (strtoll(L->s2i.e[j].value, NULL, 10) == id) { first = L->s2i.e[j].line; break; }
                reject(v, SPK_EXIT_DATA, "%s:%lld: index %lld of speaker '%s' is already used on line %lld", o->spk2id,
                       (long long)e->line, id, e->key, (long long)first);
                free(ss);
                goto out;
            }
            L->speakers[id] = e->key;
            e->index = id;
        }
        for (int64_t i = 0; i < L->n; i++) {
            entry_t *se = find_key(ss, L->s2i.n, spk_of[i]->value);
            if (!se) {
                reject(v, SPK_EXIT_DATA, "%s:%lld: speaker '%s' of utterance '%s' is not in %s", o->utt2spk,
                       (long long)spk_of[i]->line, spk_of[i]->value, spk_of[i]->key, o->spk2id);
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
            reject(v, SPK_EXIT_DATA, "%s: %lld speakers do not fit int32 labels", o->utt2spk, (long long)s);
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
    free(ws);
    free(us);
    return rc;
}

// ---- the parallel part ---------------------------------------------------------------------

static int64_t block_lo(int64_t n, int k, int r) { return n * r / k; }

static int owner_of(int64_t n, int k, int64_t i) {
    int r = 0;
    while (r + 1 < k && block_lo(n, k, r + 1) <= i) r++;
    return r;
}

// Writes this rank's rows [row0, row0 + rows) of /features in rounds of at most 64 MiB per
// rank, every round collective (ranks with nothing left select nothing).
static void write_rows(const comm_t *comm, hid_t dset, hid_t dxpl, int64_t row0, int64_t rows, int64_t dim,
                       const float *feats, const char *what) {
    int64_t per_round = ((int64_t)64 << 20) / (dim * (int64_t)sizeof(float));
    if (per_round < 1) per_round = 1;
    int64_t rounds = (rows + per_round - 1) / per_round, max_rounds = 0;
    mpiCheck(MPI_Allreduce(&rounds, &max_rounds, 1, MPI_INT64_T, MPI_MAX, comm->world));
    for (int64_t r = 0; r < max_rounds; r++) {
        int64_t start = r * per_round, cnt = rows - start < per_round ? rows - start : per_round;
        if (cnt < 0) cnt = 0;
        hid_t fspace = h5Check(H5Dget_space(dset), "%s: cannot get the dataspace of '/features'", what);
        hid_t mspace;
        if (cnt > 0) {
            hsize_t off[2] = {(hsize_t)(row0 + start), 0}, count[2] = {(hsize_t)cnt, (hsize_t)dim};
            h5Check(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, off, NULL, count, NULL), "%s: cannot select rows", what);
            hsize_t m = (hsize_t)(cnt * dim);
            mspace = h5Check(H5Screate_simple(1, &m, NULL), "%s: cannot create a memory space", what);
        } else {
            h5Check(H5Sselect_none(fspace), "%s: cannot select nothing", what);
            hsize_t one = 1;
            mspace = h5Check(H5Screate_simple(1, &one, NULL), "%s: cannot create a memory space", what);
            h5Check(H5Sselect_none(mspace), "%s: cannot select nothing", what);
        }
        h5Check(H5Dwrite(dset, H5T_NATIVE_FLOAT, mspace, fspace, dxpl, cnt > 0 ? feats + start * dim : feats),
                "%s: cannot write rows %lld..%lld of '/features'", what, (long long)(row0 + start),
                (long long)(row0 + start + cnt));
        H5Sclose(mspace);
        H5Sclose(fspace);
    }
}

int cmd_prepare(const comm_t *comm, int argc, char **argv) {
    prepare_opts_t o = {.num_bins = 80, .sample_rate = 16000, .channel = 0, .seed = 0, .dither = 0.0};
    opt_parse(&table, &o, argc, argv, NULL, 0);
    if (!o.wav_scp[0]) spk_fail_all(SPK_EXIT_USAGE, "prepare: --wav-scp is required");
    if (!o.utt2spk[0]) spk_fail_all(SPK_EXIT_USAGE, "prepare: --utt2spk is required");
    if (!o.out[0]) spk_fail_all(SPK_EXIT_USAGE, "prepare: --out is required");
    const double t_start = spk_seconds();
    const int K = comm->size, me = comm->rank;
    const int64_t dim = o.num_bins;
    char tmp_path[OPT_STR_MAX + 8];
    snprintf(tmp_path, sizeof tmp_path, "%s.tmp", o.out);

    // The feature settings are checked on every rank (same verdict everywhere).
    fbank_opts_t fo = fbank_default_opts();
    fo.num_bins = (int)o.num_bins;
    fo.dither = o.dither;
    fo.dither_seed = (uint64_t)o.seed;
    fbank_t fb;
    char err[1024];
    if (fbank_init_opts(&fb, (int)o.sample_rate, &fo, err, sizeof err) != 0)
        spk_fail_all(SPK_EXIT_USAGE, "prepare: %s", err);

    // 1. Rank 0 reads the lists; everyone learns the verdict.
    verdict_t *v = callocCheck(1, sizeof *v);
    lists_t L;
    memset(&L, 0, sizeof L);
    if (me == 0) {
        if (parse_lists(&o, &L, v) == 0) {
            FILE *probe = fopen(tmp_path, "wb");
            if (!probe) reject(v, SPK_EXIT_FAILURE, "%s: cannot create the output file (%s)", tmp_path, strerror(errno));
            else fclose(probe), unlink(tmp_path);
        }
    }
    comm_bcast(comm, v, (int64_t)sizeof *v, MPI_BYTE, 0);
    if (v->code) spk_fail_all(v->code, "%s", v->msg);
    free(v);

    // 2. The utterance list: "utt\0path\0" per utterance plus wav.scp line numbers.
    int64_t hdr[3] = {0, 0, 0};  // N, text bytes, S
    char *text = NULL;
    if (me == 0) {
        hdr[0] = L.n;
        hdr[2] = L.num_speakers;
        for (int64_t i = 0; i < L.n; i++) hdr[1] += (int64_t)(strlen(L.utt[i]) + strlen(L.path[i]) + 2);
        text = mallocCheck((size_t)hdr[1]);
        char *p = text;
        for (int64_t i = 0; i < L.n; i++) {
            size_t a = strlen(L.utt[i]) + 1, b = strlen(L.path[i]) + 1;
            memcpy(p, L.utt[i], a);
            memcpy(p + a, L.path[i], b);
            p += a + b;
        }
    }
    comm_bcast(comm, hdr, 3, MPI_INT64_T, 0);
    const int64_t N = hdr[0], S = hdr[2];
    if (N > INT_MAX) spk_fail_all(SPK_EXIT_DATA, "%s: %lld utterances are more than prepare handles", o.wav_scp, (long long)N);
    if (me != 0) text = mallocCheck((size_t)hdr[1]);
    comm_bcast(comm, text, hdr[1], MPI_CHAR, 0);
    int64_t *lines = me == 0 ? L.line : mallocCheck((size_t)N * sizeof(int64_t));
    comm_bcast(comm, lines, N, MPI_INT64_T, 0);
    const int64_t lo = block_lo(N, K, me), hi = block_lo(N, K, me + 1), mine = hi - lo;
    char **utt = mallocCheck((size_t)(mine > 0 ? mine : 1) * sizeof(char *));
    char **path = mallocCheck((size_t)(mine > 0 ? mine : 1) * sizeof(char *));
    {
        char *p = text;
        for (int64_t i = 0; i < hi; i++) {
            char *u = p;
            p += strlen(p) + 1;
            char *q = p;
            p += strlen(p) + 1;
            if (i >= lo) {
                utt[i - lo] = u;
                path[i - lo] = q;
            }
        }
    }

    // 3. Decode and compute this rank's block.
    int64_t *frames = mallocCheck((size_t)(mine > 0 ? mine : 1) * sizeof(int64_t));
    int64_t feat_cap = 1 << 16, rows = 0, first_bad = INT64_MAX, resampled = 0;
    double audio_seconds = 0;
    float *feats = mallocCheck((size_t)feat_cap * sizeof(float));
    char bad_msg[2048] = "";
    for (int64_t j = 0; j < mine; j++) {
        const int64_t i = lo + j;
        audio_t a;
        int rc = audio_read(path[j], (int)o.sample_rate, (int)o.channel, &a, err, sizeof err);
        int64_t T = rc == AUDIO_OK ? fbank_num_frames(&fb, a.n) : 0;
        if (rc == AUDIO_OK && T == 0) {
            snprintf(err, sizeof err, "%s: too short: %lld samples at %lld Hz, less than one %d-sample (25 ms) frame", path[j],
                     (long long)a.n, (long long)o.sample_rate, fb.frame_length);
            rc = -1;
        }
        if (rc != AUDIO_OK) {  // this rank stops at its first failure
            first_bad = i;
            snprintf(bad_msg, sizeof bad_msg, "%s:%lld: utterance '%s': %s", o.wav_scp, (long long)lines[i], utt[j], err);
            audio_free(&a);
            break;
        }
        if ((rows + T) * dim > feat_cap) {
            while ((rows + T) * dim > feat_cap) feat_cap *= 2;
            float *nf = realloc(feats, (size_t)feat_cap * sizeof(float));
            if (!nf) spk_die(SPK_EXIT_FAILURE, "out of memory holding %lld frames of features", (long long)(rows + T));
            feats = nf;
        }
        fb.dither_stream = (uint64_t)i;
        fbank_compute(&fb, a.samples, a.n, feats + rows * dim);
        frames[j] = T;
        rows += T;
        resampled += a.file_rate != a.rate;
        audio_seconds += (double)a.n / (double)o.sample_rate;
        audio_free(&a);
    }
    fbank_free(&fb);

    // The earliest failure in wav.scp order, on whichever rank, stops everyone: its rank
    // broadcasts the reason and all ranks exit with the same line. (Non-blocking so ranks
    // that finished early sleep rather than spin on an oversubscribed node.)
    int64_t worst = INT64_MAX;
    MPI_Request req;
    mpiCheck(MPI_Iallreduce(&first_bad, &worst, 1, MPI_INT64_T, MPI_MIN, comm->world, &req));
    comm_wait(comm, &req);
    if (worst != INT64_MAX) {
        comm_bcast(comm, bad_msg, (int64_t)sizeof bad_msg, MPI_CHAR, owner_of(N, K, worst));
        spk_fail_all(SPK_EXIT_DATA, "%s", bad_msg);
    }

    // 4. Row offsets; the collective file.
    int64_t row0 = 0, total = 0;
    mpiCheck(MPI_Exscan(&rows, &row0, 1, MPI_INT64_T, MPI_SUM, comm->world));
    if (me == 0) row0 = 0;  // MPI_Exscan leaves rank 0's result undefined
    mpiCheck(MPI_Allreduce(&rows, &total, 1, MPI_INT64_T, MPI_SUM, comm->world));
    int *counts = NULL, *displs = NULL;
    int64_t *all_frames = NULL;
    if (me == 0) {
        counts = mallocCheck((size_t)K * sizeof(int));
        displs = mallocCheck((size_t)K * sizeof(int));
        for (int r = 0; r < K; r++) {
            counts[r] = (int)(block_lo(N, K, r + 1) - block_lo(N, K, r));
            displs[r] = (int)block_lo(N, K, r);
        }
        all_frames = mallocCheck((size_t)N * sizeof(int64_t));
    }
    mpiCheck(MPI_Gatherv(frames, (int)mine, MPI_INT64_T, all_frames, counts, displs, MPI_INT64_T, 0, comm->world));
    double secs = audio_seconds;
    int64_t n_resampled = 0;
    mpiCheck(MPI_Reduce(&audio_seconds, &secs, 1, MPI_DOUBLE, MPI_SUM, 0, comm->world));
    mpiCheck(MPI_Reduce(&resampled, &n_resampled, 1, MPI_INT64_T, MPI_SUM, 0, comm->world));

    h5_quiet();
    hid_t fapl = h5Check(H5Pcreate(H5P_FILE_ACCESS), "%s: cannot create file access properties", tmp_path);
    h5Check(H5Pset_fapl_mpio(fapl, comm->world, MPI_INFO_NULL), "%s: cannot select the MPI-IO driver", tmp_path);
    hid_t file = h5Check(H5Fcreate(tmp_path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "%s: cannot create the dataset file", tmp_path);
    H5Pclose(fapl);
    hsize_t dims[2] = {(hsize_t)total, (hsize_t)dim}, chunk[2];
    // Runs of frames of about 256 KiB, as io/dataset_write.c chooses them.
    hsize_t frame_bytes = (hsize_t)dim * sizeof(float);
    chunk[0] = frame_bytes >= 256 * 1024 ? 1 : (256 * 1024) / frame_bytes;
    if (chunk[0] > dims[0]) chunk[0] = dims[0];
    chunk[1] = dims[1];
    hid_t space = h5Check(H5Screate_simple(2, dims, NULL), "%s: cannot create the dataspace", tmp_path);
    hid_t dcpl = h5Check(H5Pcreate(H5P_DATASET_CREATE), "%s: cannot create dataset properties", tmp_path);
    h5Check(H5Pset_chunk(dcpl, 2, chunk), "%s: cannot set chunking", tmp_path);
    hid_t dset = h5Check(H5Dcreate2(file, "features", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
                         "%s: cannot create '/features'", tmp_path);
    H5Pclose(dcpl);
    H5Sclose(space);
    hid_t dxpl = h5Check(H5Pcreate(H5P_DATASET_XFER), "%s: cannot create transfer properties", tmp_path);
    h5Check(H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE), "%s: cannot request collective I/O", tmp_path);
    write_rows(comm, dset, dxpl, row0, rows, dim, feats, tmp_path);
    H5Pclose(dxpl);
    H5Dclose(dset);
    h5Check(H5Fclose(file), "%s: cannot close the dataset file", tmp_path);
    free(feats);

    // 5. Rank 0: metadata, attributes, rename.
    if (me == 0) {
        int64_t *offsets = mallocCheck((size_t)(N + 1) * sizeof(int64_t));
        offsets[0] = 0;
        int64_t mn = INT64_MAX, mx = 0;
        for (int64_t i = 0; i < N; i++) {
            offsets[i + 1] = offsets[i] + all_frames[i];
            if (all_frames[i] < mn) mn = all_frames[i];
            if (all_frames[i] > mx) mx = all_frames[i];
        }
        if (offsets[N] != total) spk_die(SPK_EXIT_FAILURE, "frame counts gathered (%lld) differ from the rows written (%lld)",
                                         (long long)offsets[N], (long long)total);
        hid_t f = H5Fopen(tmp_path, H5F_ACC_RDWR, H5P_DEFAULT);
        if (f < 0) spk_die(SPK_EXIT_FAILURE, "%s: cannot reopen the dataset file to finish it", tmp_path);
        h5_attr_write_str(f, "spkddp_format", DATASET_FORMAT, tmp_path);
        h5_attr_write_i64(f, "version", DATASET_VERSION, tmp_path);
        h5_attr_write_i64(f, "feature_dim", dim, tmp_path);
        h5_attr_write_i64(f, "num_speakers", S, tmp_path);
        // Provenance of the features (not part of the contract).
        h5_attr_write_str(f, "features", "kaldi-fbank", tmp_path);
        h5_attr_write_i64(f, "sample_rate", o.sample_rate, tmp_path);
        h5_attr_write_f64(f, "frame_length_ms", fo.frame_length_ms, tmp_path);
        h5_attr_write_f64(f, "frame_shift_ms", fo.frame_shift_ms, tmp_path);
        h5_attr_write_f64(f, "dither", fo.dither, tmp_path);
        hsize_t n = (hsize_t)N, n1 = n + 1;
        h5_write_array(f, "offsets", H5T_STD_I64LE, 1, &n1, offsets, tmp_path);
        h5_write_array(f, "labels", H5T_STD_I32LE, 1, &n, L.label, tmp_path);
        h5_write_strings(f, "utt_ids", (const char *const *)L.utt, N, tmp_path);
        h5_write_strings(f, "speakers", (const char *const *)L.speakers, S, tmp_path);
        h5Check(H5Fclose(f), "%s: cannot close the dataset file", tmp_path);
        if (rename(tmp_path, o.out) != 0)
            spk_die(SPK_EXIT_FAILURE, "%s: cannot rename into place (%s)", o.out, strerror(errno));
        printf("wrote %s: %lld utterances (%.1f s of audio, %lld resampled to %lld Hz), %lld speakers, "
               "%lld frames x %lld log-mel (%lld..%lld per utterance) in %.2f s on %d rank%s\n",
               o.out, (long long)N, secs, (long long)n_resampled, (long long)o.sample_rate, (long long)S,
               (long long)total, (long long)dim, (long long)mn, (long long)mx, spk_seconds() - t_start, K, K > 1 ? "s" : "");
        fflush(stdout);
        free(offsets);
        free(all_frames);
        free(counts);
        free(displs);
        free(L.utt);
        free(L.path);
        free(L.line);
        free(L.label);
        free(L.speakers);
        list_free(&L.wav);
        list_free(&L.u2s);
        list_free(&L.s2i);
    } else {
        free(lines);
    }
    free(utt);
    free(path);
    free(frames);
    free(text);
    comm_barrier(comm);
    return SPK_EXIT_OK;
}
