// The prepare pipeline (app/prepare/prepare.h): a Kaldi data directory (wav.scp, optional
// segments, utt2spk) -> a variable-length dataset of log mel filterbanks or of 16 kHz waveforms
// (docs/features.md, docs/dataset-format.md), computed in parallel with memory bounded by
// --buffer-mb:
//
//   1. read_lists    rank 0 reads and checks the lists; the verdict is broadcast, so a bad
//                    list gives one line naming the file and line, and every rank exits 3;
//   2. share_work    rank r receives the contiguous block [N r / K, N (r + 1) / K);
//   3. scan          each rank decodes its block once (no resampling, no fbank) to learn
//                    every utterance's length, and collects the entries it cannot read;
//   4. settle_bad    the unreadable entries are listed with file:line and reason: exit 3, or
//                    with --skip-bad they are left out and listed in OUT.bad;
//   5. plan_rows     every rank learns all lengths (an allgather; the prefix sum is each
//                    utterance's first row) and the ranks create OUT.tmp collectively;
//   6. compute_write each rank computes its utterances into a buffer of --buffer-mb and
//                    writes it in collective rounds until every rank is done;
//   7. finish        rank 0 adds /offsets, /labels, /utt_ids, /speakers and the attributes,
//                    renames OUT.tmp to OUT, and writes OUT.utt2dur (Kaldi's durations).
//
// --video-scp adds the /visual stream (app/prepare/prepare_visual.h): the scan also decodes
// each utterance's video into JPEG frames, spooled; they are written after the audio's rows.
//
// --kind noise|rir writes an augmentation bank (io/augment/augment.h) the same way: waveforms,
// with utt2spk's second column as each entry's category (noise, music, speech; room types);
// impulse responses are scaled to full scale before rounding to 16 bits (augmentation
// normalises their energy, so only the rounding error changes).
#include "app/prepare/prepare.h"

#include "app/prepare/prepare_visual.h"
#include "io/audio/audio.h"
#include "io/audio/audio_span.h"
#include "io/audio/fbank.h"
#include "io/audio/kaldi_data.h"
#include "io/common/atomic_file.h"
#include "io/dataset/dataset_write.h"
#include "kernels/base/check.h"
#include "kernels/base/clock.h"
#include "kernels/base/mpi_wait.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

// What every rank needs to know about the run.
typedef struct {
    prepare_config_t o;
    const comm_t *comm;
    int audio;   // --store audio, or a bank
    int rir;     // --kind rir: entries scaled to full scale
    int bank;    // --kind noise|rir
    fbank_t fb;  // frame geometry (and the fbank itself for --store fbank)
    char tmp_path[PREPARE_TEXT_MAX + 8];
    kaldi_data_t lists;         // rank 0 only
    kaldi_list_t video_list;    // rank 0, with --video-scp
    const char **video_of;      // rank 0: (N,) each utterance's video
    const char **video;         // (hi - lo,) the block's videos, with --video-scp
    prepare_visual_t *vis;      // the visual stream, with --video-scp
    int64_t *vframes, *vbytes;  // (N,) its frames and bytes of each utterance
    int64_t N, S;               // utterances in the lists, speakers
    int64_t lo, hi;             // this rank's block [lo, hi)
    char **utt;                 // (hi - lo,) ids of the block
    kaldi_span_t *span;         // (hi - lo,)
    char *text;                 // owns the block's strings
    int64_t *rows;              // (N,) rows of each utterance (frames, or samples); 0: left out
    int64_t *samples;           // (N,) samples of each at the dataset's rate (OUT.utt2dur)
    char *bad;                  // this rank's unreadable entries, one "file:line: utterance 'x': reason\n" each
    size_t bad_len, bad_cap;
    int64_t num_bad;
    double scan_s;  // seconds this rank's scan took
    char *skipped;  // rank 0: the entries --skip-bad left out, for OUT.bad once the dataset is in place
    double t0, last_print;
} prep_t;

// ---- progress --------------------------------------------------------------------------------

static void progress_line(prep_t *p, const char *phase, int64_t done, int64_t total, double audio_s, int scope_rank0) {
    double now = spk_seconds();
    if (p->o.progress <= 0 || p->comm->rank != 0 || now - p->last_print < p->o.progress) return;
    p->last_print = now;
    double el = now - p->t0, rate = done / (el > 0 ? el : 1e-9), eta = rate > 0 ? (double)(total - done) / rate : 0;
    printf("prepare: %s %lld/%lld files%s (%.0f%%), %.1f files/s, %.2f h of audio/s, ETA %.0f s\n", phase,
           (long long)done, (long long)total, scope_rank0 ? " of rank 0" : "",
           100.0 * (double)done / (double)(total ? total : 1), rate, audio_s / 3600.0 / (el > 0 ? el : 1e-9), eta);
    fflush(stdout);
}

// ---- 1. the lists ------------------------------------------------------------------------------

// --video-scp or --visual-scp.
static const char *visual_list(const prep_t *p) { return p->o.video_scp[0] ? p->o.video_scp : p->o.visual_scp; }

static void read_lists(prep_t *p) {
    kaldi_verdict_t *v = callocCheck(1, sizeof *v);
    if (p->comm->rank == 0 &&
        kaldi_data_read(&p->lists, p->o.wav_scp, p->o.segments, p->o.utt2spk, p->o.spk2id, v) == 0 &&
        (!visual_list(p)[0] || prepare_visual_match(visual_list(p), &p->lists, &p->video_list, &p->video_of, v) == 0)) {
        FILE *probe = fopen(p->tmp_path, "wb");
        if (!probe) {
            v->code = SPK_EXIT_FAILURE;
            snprintf(v->msg, sizeof v->msg, "%s: cannot create the output file (%s)", p->tmp_path, strerror(errno));
        } else {
            fclose(probe);
            unlink(p->tmp_path);
        }
    }
    comm_bcast(p->comm, v, (int64_t)sizeof *v, MPI_BYTE, 0);
    if (v->code) spk_fail_all(v->code, "%s", v->msg);
    free(v);
}

// ---- 2. the blocks -----------------------------------------------------------------------------

static int64_t block_lo(int64_t n, int k, int r) { return n * r / k; }

// Rank 0 packs each utterance as "utt\0source\0" + (start, end, line) and scatters the blocks.
static void share_work(prep_t *p) {
    const int K = p->comm->size, me = p->comm->rank;
    int64_t hdr[2] = {p->lists.n, p->lists.num_speakers};
    comm_bcast(p->comm, hdr, 2, MPI_INT64_T, 0);
    p->N = hdr[0];
    p->S = hdr[1];
    if (p->N > INT_MAX)
        spk_fail_all(SPK_EXIT_DATA, "%s: %lld utterances are more than prepare handles", p->o.wav_scp, (long long)p->N);
    p->lo = block_lo(p->N, K, me);
    p->hi = block_lo(p->N, K, me + 1);
    const int64_t mine = p->hi - p->lo;
    int *bytes = NULL, *displs = NULL;
    char *all = NULL;
    if (me == 0) {
        bytes = callocCheck((size_t)K, sizeof(int));
        displs = callocCheck((size_t)K, sizeof(int));
        int64_t total = 0;
        for (int r = 0; r < K; r++) {
            displs[r] = (int)total;
            for (int64_t i = block_lo(p->N, K, r); i < block_lo(p->N, K, r + 1); i++)
                total += (int64_t)(strlen(p->lists.utt[i]) + strlen(p->lists.span[i].source) + 3 + 3 * sizeof(double) +
                                   (p->video_of ? strlen(p->video_of[i]) : 0));
            if (total > INT_MAX)
                spk_fail_all(SPK_EXIT_DATA, "%s: the lists are too long to share (%lld bytes)", p->o.wav_scp,
                             (long long)total);
            bytes[r] = (int)total - displs[r];
        }
        char *q = all = mallocCheck((size_t)(total ? total : 1));
        for (int64_t i = 0; i < p->N; i++) {
            const kaldi_span_t *s = &p->lists.span[i];
            double nums[3] = {s->start, s->end, (double)s->line};
            memcpy(q, nums, sizeof nums);
            q += sizeof nums;
            q = stpcpy(q, p->lists.utt[i]) + 1;
            q = stpcpy(q, s->source) + 1;
            q = stpcpy(q, p->video_of ? p->video_of[i] : "") + 1;
        }
    }
    int my_bytes = 0;
    SPK_COLLECTIVE("an exchange of prepare's lists", MPI_Iscatter, bytes, 1, MPI_INT, &my_bytes, 1, MPI_INT, 0,
                   p->comm->world);
    p->text = mallocCheck((size_t)(my_bytes ? my_bytes : 1));
    SPK_COLLECTIVE("an exchange of prepare's lists", MPI_Iscatterv, all, bytes, displs, MPI_CHAR, p->text, my_bytes,
                   MPI_CHAR, 0, p->comm->world);
    free(all);
    free(bytes);
    free(displs);
    p->utt = mallocCheck((size_t)(mine ? mine : 1) * sizeof(char *));
    p->span = mallocCheck((size_t)(mine ? mine : 1) * sizeof(kaldi_span_t));
    p->video = mallocCheck((size_t)(mine ? mine : 1) * sizeof(char *));
    char *q = p->text;
    for (int64_t j = 0; j < mine; j++) {
        double nums[3];
        memcpy(nums, q, sizeof nums);
        q += sizeof nums;
        p->utt[j] = q;
        q += strlen(q) + 1;
        p->span[j] = (kaldi_span_t){q, nums[0], nums[1], (int64_t)nums[2]};
        q += strlen(q) + 1;
        p->video[j] = q;
        q += strlen(q) + 1;
    }
}

// ---- 3. scan -------------------------------------------------------------------------------------

static const char *listed_in(const prep_t *p) { return p->o.segments[0] ? p->o.segments : p->o.wav_scp; }

static void note_bad(prep_t *p, int64_t j, const char *why) {
    char line[2048];
    int len = snprintf(line, sizeof line, "%s:%lld: utterance '%s': %s\n", listed_in(p), (long long)p->span[j].line,
                       p->utt[j], why);
    if (len >= (int)sizeof line) len = (int)sizeof line - 1;
    if (p->bad_len + (size_t)len + 1 > p->bad_cap) {
        p->bad_cap = (p->bad_cap + (size_t)len + 1) * 2;
        char *b = realloc(p->bad, p->bad_cap);
        if (!b) spk_die(SPK_EXIT_FAILURE, "out of memory listing unreadable entries");
        p->bad = b;
    }
    memcpy(p->bad + p->bad_len, line, (size_t)len + 1);
    p->bad_len += (size_t)len;
    p->num_bad++;
}

// Rows of an utterance of n samples: its frames, or its samples; 0 frames is an error.
static int64_t rows_of(const prep_t *p, int64_t n, char *err, size_t cap) {
    int64_t frames = fbank_num_frames(&p->fb, n);
    if (frames == 0) {
        snprintf(err, cap, "too short: %lld samples at %lld Hz, less than one %d-sample (%g ms) frame", (long long)n,
                 (long long)p->o.sample_rate, p->fb.frame_length, p->fb.opts.frame_length_ms);
        return 0;
    }
    return p->audio ? n : frames;
}

// Digital silence: nothing a noise or an impulse response bank can use.
static int silent(const float *x, int64_t n) {
    for (int64_t k = 0; k < n; k++)
        if (fabsf(x[k]) >= 1.0f / 32768.0f) return 0;
    return 1;
}

static void scan(prep_t *p) {
    const double t0 = spk_seconds();
    const int64_t mine = p->hi - p->lo;
    p->rows = callocCheck((size_t)(p->N ? p->N : 1), sizeof(int64_t));
    p->samples = callocCheck((size_t)(p->N ? p->N : 1), sizeof(int64_t));
    p->vframes = callocCheck((size_t)(p->N ? p->N : 1), sizeof(int64_t));
    p->vbytes = callocCheck((size_t)(p->N ? p->N : 1), sizeof(int64_t));
    audio_span_reader_t r;
    audio_span_init(&r, (int)p->o.channel);
    double audio_s = 0;
    char err[1024];
    for (int64_t j = 0; j < mine; j++) {
        int64_t n = 0;
        if (audio_span_length(&r, &p->span[j], (int)p->o.sample_rate, &n, err, sizeof err) == AUDIO_OK) {
            char why[256];
            p->rows[p->lo + j] = rows_of(p, n, why, sizeof why);
            p->samples[p->lo + j] = n;
            if (!p->rows[p->lo + j]) snprintf(err, sizeof err, "%.700s: %s", p->span[j].source, why);
            if (p->rows[p->lo + j] && p->bank && silent(r.a.samples, r.a.n)) {
                p->rows[p->lo + j] = 0;
                snprintf(err, sizeof err,
                         "%.600s: is silent (every sample below one 16-bit step): a %.8s bank entry must have energy, "
                         "or augmentation with it changes nothing",
                         p->span[j].source, p->o.kind);
            }
        }
        if (p->rows[p->lo + j] && p->vis &&
            prepare_visual_scan(p->vis, p->video[j], fbank_num_frames(&p->fb, n), &p->vframes[p->lo + j],
                                &p->vbytes[p->lo + j], err, sizeof err) != 0)
            p->rows[p->lo + j] = 0;
        if (!p->rows[p->lo + j]) note_bad(p, j, err);
        audio_s += (double)n / (double)p->o.sample_rate;
        progress_line(p, p->vis ? "scan (and video)" : "scan", j + 1, mine, audio_s, 1);
    }
    audio_span_free(&r);
    p->scan_s = spk_seconds() - t0;
}

// ---- 4. unreadable entries --------------------------------------------------------------------------

// Gathers every rank's list to rank 0 (in list order: blocks are in rank order).
static char *gather_bad(prep_t *p, int64_t *total_bad) {
    const int K = p->comm->size;
    int len = (int)p->bad_len, *lens = NULL, *displs = NULL;
    char *all = NULL;
    // The ranks meet here after their scans, which decode every entry and may differ by more than
    // SPKDDP_MPI_TIMEOUT on a large corpus: a healthy peer is waited for up to twice this rank's
    // own scan as well (the shares are balanced by size), a stuck one no longer than that.
    spk_wait_t w = *spk_wait_default();
    if (w.timeout_s > 0 && w.timeout_s < 2.0 * p->scan_s) w.timeout_s = 2.0 * p->scan_s;
    MPI_Request req;
    mpiCheck(MPI_Iallreduce(&p->num_bad, total_bad, 1, MPI_INT64_T, MPI_SUM, p->comm->world, &req));
    spk_mpi_wait(&w, &req, "the ranks' meeting after their scans");
    if (*total_bad == 0) return NULL;
    if (p->comm->rank == 0) lens = mallocCheck((size_t)K * sizeof(int)), displs = mallocCheck((size_t)K * sizeof(int));
    SPK_COLLECTIVE("an exchange of prepare's lists", MPI_Igather, &len, 1, MPI_INT, lens, 1, MPI_INT, 0,
                   p->comm->world);
    if (p->comm->rank == 0) {
        int64_t t = 0;
        for (int r = 0; r < K; r++) displs[r] = (int)t, t += lens[r];
        all = mallocCheck((size_t)t + 1);
        all[t] = 0;
    }
    SPK_COLLECTIVE("an exchange of prepare's lists", MPI_Igatherv, p->bad ? p->bad : "", len, MPI_CHAR, all, lens,
                   displs, MPI_CHAR, 0, p->comm->world);
    free(lens);
    free(displs);
    return all;
}

// w (the output being written, or NULL): the entries failed while computing, after rows were
// planned for them, so they can no longer be left out.
static void settle_bad(prep_t *p, dataset_writer_t *w) {
    const int fatal = w != NULL;
    int64_t total = 0;
    char *all = gather_bad(p, &total);
    if (total == 0) return;
    if (fatal || !p->o.skip_bad) {
        const char *one = "";
        if (w) dataset_writer_abandon(w);
        if (p->comm->rank == 0) {
            if (total == 1 && !fatal) {
                all[strlen(all) - 1] = 0;
                one = all;
            } else {
                fputs(all, stderr);
                fflush(stderr);
            }
        }
        if (fatal)
            spk_fail_all(SPK_EXIT_DATA,
                         "%lld entr%s of %s failed after the scan had read them (listed above; changed files?)",
                         (long long)total, total == 1 ? "y" : "ies", listed_in(p));
        if (total == 1) spk_fail_all(SPK_EXIT_DATA, "%s", one);
        spk_fail_all(SPK_EXIT_DATA,
                     "%lld of %lld entries of %s cannot be read (listed above); fix them, or pass --skip-bad to "
                     "leave them out",
                     (long long)total, (long long)p->N, listed_in(p));
    }
    if (p->comm->rank == 0) {
        printf("prepare: left out %lld unreadable entr%s of %lld (to be listed in %s.bad)\n", (long long)total,
               total == 1 ? "y" : "ies", (long long)p->N, p->o.out);
        fflush(stdout);
        p->skipped = all;
        all = NULL;
    }
    free(all);
    p->num_bad = 0;
    p->bad_len = 0;
}

// ---- 5. rows --------------------------------------------------------------------------------------

typedef struct {
    int64_t kept;      // utterances written
    int64_t *lengths;  // (kept,) rows of each
    int64_t *first;    // (N,) first row of utterance i (when kept)
} plan_t;

static plan_t plan_rows(prep_t *p, dataset_writer_t *w) {
    const int K = p->comm->size;
    int *counts = mallocCheck((size_t)K * sizeof(int)), *displs = mallocCheck((size_t)K * sizeof(int));
    for (int r = 0; r < K; r++) {
        displs[r] = (int)block_lo(p->N, K, r);
        counts[r] = (int)(block_lo(p->N, K, r + 1) - displs[r]);
    }
    SPK_COLLECTIVE("an exchange of prepare's lists", MPI_Iallgatherv, MPI_IN_PLACE, 0, MPI_INT64_T, p->rows, counts,
                   displs, MPI_INT64_T, p->comm->world);
    SPK_COLLECTIVE("an exchange of prepare's lists", MPI_Iallgatherv, MPI_IN_PLACE, 0, MPI_INT64_T, p->samples, counts,
                   displs, MPI_INT64_T, p->comm->world);
    if (p->vis) {
        SPK_COLLECTIVE("an exchange of prepare's lists", MPI_Iallgatherv, MPI_IN_PLACE, 0, MPI_INT64_T, p->vframes,
                       counts, displs, MPI_INT64_T, p->comm->world);
        SPK_COLLECTIVE("an exchange of prepare's lists", MPI_Iallgatherv, MPI_IN_PLACE, 0, MPI_INT64_T, p->vbytes,
                       counts, displs, MPI_INT64_T, p->comm->world);
    }
    free(counts);
    free(displs);
    plan_t pl = {0, mallocCheck((size_t)(p->N ? p->N : 1) * sizeof(int64_t)),
                 mallocCheck((size_t)(p->N ? p->N : 1) * sizeof(int64_t))};
    int64_t row = 0;
    for (int64_t i = 0; i < p->N; i++) {
        pl.first[i] = row;
        if (p->rows[i] > 0) pl.lengths[pl.kept++] = p->rows[i];
        row += p->rows[i];
    }
    if (pl.kept == 0) spk_fail_all(SPK_EXIT_DATA, "%s: no readable utterance is left", listed_in(p));
    dataset_layout_t lay = {.num_utts = pl.kept,
                            .num_speakers = p->S,
                            .feature_dim = p->o.num_bins,
                            .lengths = pl.lengths,
                            .sample_rate = p->audio ? p->o.sample_rate : 0};
    dataset_writer_create(w, p->o.out, p->comm->world, &lay);
    return pl;
}

// ---- 6. compute and write ---------------------------------------------------------------------------

typedef struct {
    char *buf;           // (cap,) rows of whole utterances, in list order
    int64_t cap, used;   // bytes
    int64_t row0, rows;  // rows the buffer holds, from row0
} rows_buf_t;

// Round: every rank writes what it holds (maybe nothing), collectively. Returns whether any
// rank has more to do; `stats` (files, seconds of audio, more) are summed over the ranks.
static int write_round(prep_t *p, dataset_writer_t *w, rows_buf_t *b, double stats[3]) {
    double sum[3];
    MPI_Request req;  // ranks that are ahead sleep here instead of spinning in the write
    mpiCheck(MPI_Iallreduce(stats, sum, 3, MPI_DOUBLE, MPI_SUM, p->comm->world, &req));
    comm_wait(p->comm, &req);
    dataset_writer_put_rows(w, b->row0, b->rows, b->buf);
    b->row0 += b->rows;
    b->rows = b->used = 0;
    progress_line(p, "features", (int64_t)sum[0], p->N, sum[1], 0);
    return sum[2] > 0;
}

// The rows of utterance j of the block into dst (fbank frames or int16 samples).
static int compute_one(prep_t *p, audio_span_reader_t *r, int64_t j, char *dst, double *audio_s, int64_t *resampled,
                       char *err, size_t cap) {
    const float *x;
    int64_t n;
    if (audio_span_read(r, &p->span[j], (int)p->o.sample_rate, &x, &n, err, cap) != AUDIO_OK) return -1;
    char why[256];
    if (rows_of(p, n, why, sizeof why) != p->rows[p->lo + j]) {
        snprintf(err, cap, "%s: %lld samples at %lld Hz where the scan found %lld rows", p->span[j].source,
                 (long long)n, (long long)p->o.sample_rate, (long long)p->rows[p->lo + j]);
        return -1;
    }
    if (p->audio) {
        int16_t *s = (int16_t *)dst;
        double scale = 32768.0;  // 16-bit sources come back exactly (v / 32768 * 32768)
        if (p->rir) {
            float peak = 0;
            for (int64_t k = 0; k < n; k++) peak = fabsf(x[k]) > peak ? fabsf(x[k]) : peak;
            if (peak > 0) scale = 32767.0 / peak;
        }
        for (int64_t k = 0; k < n; k++) {
            double v = nearbyint((double)x[k] * scale);
            s[k] = (int16_t)(v > 32767 ? 32767 : v < -32768 ? -32768 : v);
        }
    } else {
        p->fb.dither_stream = (uint64_t)(p->lo + j);
        fbank_compute(&p->fb, x, n, (float *)dst);
    }
    *audio_s += (double)n / (double)p->o.sample_rate;
    *resampled += r->a.file_rate != r->a.rate;
    return 0;
}

static void compute_write(prep_t *p, dataset_writer_t *w, const plan_t *pl, double *audio_s, int64_t *resampled) {
    const int64_t mine = p->hi - p->lo,
                  row_bytes = p->audio ? (int64_t)sizeof(int16_t) : p->o.num_bins * (int64_t)sizeof(float);
    rows_buf_t b = {NULL, p->o.buffer_mb << 20, 0, 0, 0};
    b.buf = mallocCheck((size_t)b.cap);
    for (int64_t j = 0; j < mine; j++)  // this rank's first kept row
        if (p->rows[p->lo + j] > 0) {
            b.row0 = pl->first[p->lo + j];
            break;
        }
    audio_span_reader_t r;
    audio_span_init(&r, (int)p->o.channel);
    char err[1024];
    int64_t j = 0, files = 0;
    double stats[3];
    for (;;) {
        // Whole utterances until the next one does not fit (one larger than the buffer gets
        // a buffer of its own size: memory is bounded by max(buffer, longest utterance)).
        for (; j < mine; j++) {
            int64_t rows = p->rows[p->lo + j], need = rows * row_bytes;
            if (rows == 0) continue;
            if (b.used + need > b.cap) {
                if (b.used > 0) break;
                free(b.buf);
                b.buf = mallocCheck((size_t)(b.cap = need));
            }
            if (compute_one(p, &r, j, b.buf + b.used, audio_s, resampled, err, sizeof err) != 0) {
                note_bad(p, j, err);
                memset(b.buf + b.used, 0, (size_t)need);  // the rows are planned; the run fails after the write
            }
            b.used += need;
            b.rows += rows;
            files++;
        }
        stats[0] = (double)files;
        stats[1] = *audio_s;
        stats[2] = j < mine;
        if (!write_round(p, w, &b, stats)) break;
    }
    audio_span_free(&r);
    free(b.buf);
    settle_bad(p, w);
}

// ---- 7. metadata -------------------------------------------------------------------------------

// Rank 0: OUT.utt2dur, Kaldi's "UTTERANCE-ID SECONDS" of every utterance written (what
// calibration takes as a quality measure), beside the dataset.
static void write_utt2dur(const prep_t *p) {
    char path[PREPARE_TEXT_MAX + 16], err[1024];
    snprintf(path, sizeof path, "%s.utt2dur", p->o.out);
    atomic_text_t t;
    atomic_text_open(&t);
    for (int64_t i = 0; i < p->N; i++)
        if (p->rows[i] > 0) fprintf(t.f, "%s %g\n", p->lists.utt[i], (double)p->samples[i] / (double)p->o.sample_rate);
    if (atomic_text_commit(&t, path, err, sizeof err) != 0) spk_die(SPK_EXIT_FAILURE, "%s", err);
}

// Rank 0: the visual stream's size, against the audio's, per hour.
static void print_visual(const prep_t *p) {
    int64_t frames = 0, bytes = 0;
    double secs = 0;
    for (int64_t i = 0; i < p->N; i++)
        if (p->rows[i] > 0) frames += p->vframes[i], bytes += p->vbytes[i], secs += (double)p->samples[i];
    secs /= (double)p->o.sample_rate;
    if (p->o.visual_scp[0]) {
        printf(", %lld visual frames of features at %g frames/s (%.1f MB)", (long long)frames, p->o.visual_fps,
               (double)bytes / 1e6);
        return;
    }
    printf(
        ", %lld JPEG frames of %lldx%lld %s at %g frames/s (%.1f MB, %.1f MB per hour; 16-bit audio: %.1f MB per "
        "hour)",
        (long long)frames, (long long)p->o.visual_size, (long long)p->o.visual_size, p->o.visual_color, p->o.visual_fps,
        (double)bytes / 1e6, (double)bytes / 1e6 / (secs / 3600.0), (double)p->o.sample_rate * 2.0 * 3600.0 / 1e6);
}

static void finish(prep_t *p, dataset_writer_t *w, const plan_t *pl, double audio_s, int64_t resampled) {
    double secs = 0;
    int64_t n_resampled = 0, peak_kib = 0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    SPK_COLLECTIVE("an exchange of prepare's lists", MPI_Ireduce, &(int64_t){ru.ru_maxrss}, &peak_kib, 1, MPI_INT64_T,
                   MPI_MAX, 0, p->comm->world);
    SPK_COLLECTIVE("an exchange of prepare's lists", MPI_Ireduce, &audio_s, &secs, 1, MPI_DOUBLE, MPI_SUM, 0,
                   p->comm->world);
    SPK_COLLECTIVE("an exchange of prepare's lists", MPI_Ireduce, &resampled, &n_resampled, 1, MPI_INT64_T, MPI_SUM, 0,
                   p->comm->world);
    dataset_writer_note_str(w, "features", "kaldi-fbank");
    dataset_writer_note_i64(w, "sample_rate", p->o.sample_rate);
    dataset_writer_note_f64(w, "frame_length_ms", p->fb.opts.frame_length_ms);
    dataset_writer_note_f64(w, "frame_shift_ms", p->fb.opts.frame_shift_ms);
    dataset_writer_note_f64(w, "dither", p->audio ? 0.0 : p->fb.opts.dither);
    if (p->bank) dataset_writer_note_str(w, "bank", p->o.kind);
    int32_t *labels = NULL;
    char **ids = NULL;
    int64_t mn = INT64_MAX, mx = 0, total = 0;
    if (p->comm->rank == 0) {  // the kept utterances, in list order
        labels = mallocCheck((size_t)pl->kept * sizeof(int32_t));
        ids = mallocCheck((size_t)pl->kept * sizeof(char *));
        for (int64_t i = 0, k = 0; i < p->N; i++) {
            if (p->rows[i] == 0) continue;
            labels[k] = p->lists.label[i];
            ids[k++] = p->lists.utt[i];
            mn = p->rows[i] < mn ? p->rows[i] : mn;
            mx = p->rows[i] > mx ? p->rows[i] : mx;
            total += p->rows[i];
        }
    }
    dataset_writer_finish(w, labels, (const char *const *)ids, (const char *const *)p->lists.speakers);
    if (p->comm->rank == 0 && !p->bank) write_utt2dur(p);
    if (p->comm->rank == 0) {
        const int K = p->comm->size;
        printf("wrote %s: %lld %s (%.1f s of audio, %lld resampled to %lld Hz), %lld %s, ", p->o.out,
               (long long)pl->kept, p->bank ? "entries" : "utterances", secs, (long long)n_resampled,
               (long long)p->o.sample_rate, (long long)p->S, p->bank ? "categories" : "speakers");
        if (p->audio)
            printf("%lld int16 samples (%lld..%lld per utterance; fbank of %lld bins computed when training)",
                   (long long)total, (long long)mn, (long long)mx, (long long)p->o.num_bins);
        else
            printf("%lld frames x %lld log-mel (%lld..%lld per utterance)", (long long)total, (long long)p->o.num_bins,
                   (long long)mn, (long long)mx);
        if (p->vis) print_visual(p);
        double el = spk_seconds() - p->t0;
        printf(" in %.2f s on %d rank%s (%.2f h of audio/s), peak RSS %.1f MiB per rank\n", el, K, K > 1 ? "s" : "",
               secs / 3600.0 / el, (double)peak_kib / 1024.0);
        fflush(stdout);
    }
    free(labels);
    free(ids);
}

// OUT.bad beside the dataset once that is in place: the entries --skip-bad left out, or no file at
// all (an older one listed another dataset's). Written only now, so a run stopped or failed
// before leaves none.
static void write_skipped(prep_t *p) {
    if (p->comm->rank != 0) return;
    char path[PREPARE_TEXT_MAX + 8], err[PREPARE_TEXT_MAX + 256];
    snprintf(path, sizeof path, "%s.bad", p->o.out);
    if (!p->skipped) {
        if (unlink(path) != 0 && errno != ENOENT)
            spk_warn("%s: cannot remove the older list (%s)", path, strerror(errno));
        return;
    }
    if (atomic_write_file(path, p->skipped, strlen(p->skipped), ATOMIC_REPLACE, err, sizeof err) != 0)
        spk_die(SPK_EXIT_FAILURE, "%s (the list of skipped entries)", err);
    free(p->skipped);
    p->skipped = NULL;
}

int prepare_run(const comm_t *comm, const prepare_config_t *cfg) {
    prep_t *p = callocCheck(1, sizeof *p);
    p->o = *cfg;
    p->comm = comm;
    p->audio = strcmp(p->o.store, "audio") == 0;
    p->rir = strcmp(p->o.kind, "rir") == 0;
    p->bank = strcmp(p->o.kind, "speech") != 0;
    p->t0 = p->last_print = spk_seconds();
    snprintf(p->tmp_path, sizeof p->tmp_path, "%s.tmp", p->o.out);
    audio_set_command_limits(p->o.pipe_timeout, (size_t)p->o.pipe_max_mib << 20);

    // The feature settings are checked on every rank (same verdict everywhere).
    fbank_opts_t fo = fbank_default_opts();
    fo.num_bins = (int)p->o.num_bins;
    fo.dither = p->o.dither;
    fo.dither_seed = (uint64_t)p->o.seed;
    char err[1024];
    if (fbank_init_opts(&p->fb, (int)p->o.sample_rate, &fo, err, sizeof err) != 0)
        spk_fail_all(SPK_EXIT_USAGE, "prepare: %s", err);

    read_lists(p);
    if (visual_list(p)[0])
        p->vis = prepare_visual_create(&(prepare_visual_opts_t){.out = p->o.out,
                                                                .fps = p->o.visual_fps,
                                                                .audio_rate = 1000.0 / p->fb.opts.frame_shift_ms,
                                                                .size = (int)p->o.visual_size,
                                                                .channels = strcmp(p->o.visual_color, "gray") ? 3 : 1,
                                                                .quality = (int)p->o.visual_quality,
                                                                .timeout = p->o.pipe_timeout,
                                                                .features = p->o.visual_scp[0] != 0});
    if (p->vis) prepare_visual_agree_width(p->vis, comm, p->video_of, comm->rank == 0 ? p->lists.n : 0);
    share_work(p);
    scan(p);
    settle_bad(p, NULL);
    dataset_writer_t *w = callocCheck(1, sizeof *w);
    plan_t pl = plan_rows(p, w);
    double audio_s = 0;
    int64_t resampled = 0;
    compute_write(p, w, &pl, &audio_s, &resampled);
    if (p->vis)
        prepare_visual_write(p->vis, w, comm, p->vframes, p->vbytes, p->rows, p->N, p->lo, p->o.buffer_mb << 20);
    finish(p, w, &pl, audio_s, resampled);
    write_skipped(p);

    fbank_free(&p->fb);
    free(w);
    free(pl.lengths);
    free(pl.first);
    if (comm->rank == 0) kaldi_data_free(&p->lists);
    if (comm->rank == 0 && p->video_of) kaldi_list_free(&p->video_list);
    free(p->video_of);
    free(p->video);
    free(p->vframes);
    free(p->vbytes);
    prepare_visual_free(p->vis);
    free(p->utt);
    free(p->span);
    free(p->text);
    free(p->rows);
    free(p->samples);
    free(p->bad);
    free(p);
    return SPK_EXIT_OK;
}
