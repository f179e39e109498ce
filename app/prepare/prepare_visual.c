// The visual stream of `spkddp prepare` (app/prepare/prepare_visual.h).
#include "app/prepare/prepare_visual.h"

#include "io/dataset/dataset.h"
#include "io/dataset/matrix_file.h"
#include "io/dataset/utt_ids.h"
#include "io/video/image_jpeg.h"
#include "io/video/video_frames.h"
#include "kernels/base/check.h"
#include "kernels/base/mpi_wait.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// A video may end this much before its audio (container and codec delays): its last frame is
// repeated. A larger gap is a bad entry, as a truncated file would be.
#define VISUAL_SHORT_S 0.2

struct prepare_visual {
    video_spec_t spec;
    int quality;
    double fps, audio_rate;
    int64_t ratio;  // audio frames per visual frame
    jpeg_codec_t *jpeg;
    video_frames_t frames;
    FILE *spool;   // this rank's frames, as they go into /visual/jpeg
    uint8_t *utt;  // (utt_cap,) one utterance's frames before they are spooled
    size_t utt_cap;
    int64_t total_frames, total_bytes;
    int features;  // --visual-scp: feature matrices (dim values a frame), not videos
    int64_t dim;   // their width: the list's first readable matrix's (prepare_visual_agree_width)
};

int prepare_visual_match(const char *video_scp, const kaldi_data_t *d, kaldi_list_t *list, const char ***video,
                         kaldi_verdict_t *v) {
    if (kaldi_list_read(video_scp, "video list", "'UTTERANCE-ID PATH'", list, v) != 0) return -1;
    utt_index_t ix;
    char **keys = mallocCheck((size_t)(list->n ? list->n : 1) * sizeof(char *));
    for (int64_t k = 0; k < list->n; k++) keys[k] = list->e[k].key;
    if (utt_index_build(&ix, keys, list->n, video_scp, v->msg, sizeof v->msg) != 0) {
        free(keys);
        v->code = SPK_EXIT_DATA;
        return -1;
    }
    const char **out = mallocCheck((size_t)(d->n ? d->n : 1) * sizeof(char *));
    int rc = 0;
    for (int64_t i = 0; i < d->n && !rc; i++) {
        int64_t k = utt_index_find(&ix, d->utt[i]);
        if (k < 0) {
            v->code = SPK_EXIT_DATA;
            snprintf(v->msg, sizeof v->msg, "%s: no video for utterance '%s' (%s:%lld)", video_scp, d->utt[i],
                     d->listed_in, (long long)d->span[i].line);
            rc = -1;
        } else {
            out[i] = list->e[ix.index[k]].value;
        }
    }
    utt_index_free(&ix);
    free(keys);
    if (rc) {
        free(out);
        return -1;
    }
    *video = out;
    return 0;
}

// An unlinked file beside the output: it takes the frames, and no exit leaves it behind.
static FILE *open_spool(const char *out) {
    char path[4096];
    snprintf(path, sizeof path, "%s.visual.XXXXXX", out);
    int fd = mkstemp(path);
    if (fd < 0)
        spk_die(SPK_EXIT_FAILURE, "%s: cannot create a spool file for the video frames (%s)", path, strerror(errno));
    unlink(path);
    FILE *f = fdopen(fd, "w+b");
    if (!f) spk_die(SPK_EXIT_FAILURE, "%s: cannot open the spool file (%s)", path, strerror(errno));
    return f;
}

prepare_visual_t *prepare_visual_create(const prepare_visual_opts_t *o) {
    prepare_visual_t *v = callocCheck(1, sizeof *v);
    v->fps = o->fps;
    v->audio_rate = o->audio_rate;
    v->ratio = (int64_t)(o->audio_rate / o->fps + 0.5);
    v->spec = (video_spec_t){.fps = o->fps, .size = o->size, .channels = o->channels, .timeout = o->timeout};
    v->quality = o->quality;
    v->features = o->features;
    v->jpeg = jpeg_codec_create();
    if (!v->jpeg) spk_die(SPK_EXIT_FAILURE, "out of memory for a JPEG compressor");
    v->spool = open_spool(o->out);
    return v;
}

void prepare_visual_free(prepare_visual_t *v) {
    if (!v) return;
    jpeg_codec_free(v->jpeg);
    video_frames_free(&v->frames);
    if (v->spool) fclose(v->spool);
    free(v->utt);
    free(v);
}

// Appends len bytes to the utterance's buffer at *used.
static void put_bytes(prepare_visual_t *v, size_t *used, const void *src, size_t len) {
    if (*used + len > v->utt_cap) {
        size_t cap = (*used + len) * 2;
        uint8_t *p = realloc(v->utt, cap);
        if (!p) spk_die(SPK_EXIT_FAILURE, "out of memory for %zu bytes of video frames", cap);
        v->utt = p;
        v->utt_cap = cap;
    }
    memcpy(v->utt + *used, src, len);
    *used += len;
}

// The frames an utterance's audio needs (at least one), or -1 with err filled when the source
// has too few of them (more than VISUAL_SHORT_S short).
static int64_t frames_needed(const prepare_visual_t *v, const char *path, int64_t audio_frames, int64_t have, char *err,
                             size_t cap) {
    const int64_t need = audio_frames / v->ratio > 0 ? audio_frames / v->ratio : 1;
    if ((double)(need - have) / v->fps <= VISUAL_SHORT_S) return need;
    snprintf(err, cap, "%s: %.2f s of %s where its audio needs %.2f s (%lld frames at %g frames/s)", path,
             (double)have / v->fps, v->features ? "features" : "video", (double)need / v->fps, (long long)need, v->fps);
    return -1;
}

// The frames of a video, JPEG-compressed, each after its 4-byte length.
static int encode_video(prepare_visual_t *v, const char *path, int64_t audio_frames, int64_t *frames, size_t *used,
                        char *err, size_t cap) {
    v->spec.max_frames = audio_frames / v->ratio > 0 ? audio_frames / v->ratio : 1;  // (more are never stored)
    if (video_read_frames(path, &v->spec, &v->frames, err, cap) != 0) return -1;
    const int64_t have = v->frames.n, need = frames_needed(v, path, audio_frames, have, err, cap);
    if (need < 0) return -1;
    const size_t pic = (size_t)v->spec.size * (size_t)v->spec.size * (size_t)v->spec.channels;
    for (int64_t t = 0; t < need; t++) {
        const uint8_t *src = v->frames.pixels + (size_t)(t < have ? t : have - 1) * pic, *jpg;
        size_t len;
        char why[256];
        if (jpeg_encode(v->jpeg, src, v->spec.size, v->spec.channels, v->quality, &jpg, &len, why, sizeof why) != 0) {
            snprintf(err, cap, "%s: frame %lld: %s", path, (long long)t, why);
            return -1;
        }
        const uint8_t le[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16), (uint8_t)(len >> 24)};
        put_bytes(v, used, le, 4);
        put_bytes(v, used, jpg, len);
    }
    *frames = need;
    return 0;
}

// The rows of a feature matrix as float32, as wide as this rank's others.
static int encode_features(prepare_visual_t *v, const char *spec, int64_t audio_frames, int64_t *frames, size_t *used,
                           char *err, size_t cap) {
    float *x = NULL;
    int64_t have = 0, dim = 0;
    if (matrix_read(spec, &x, &have, &dim, err, cap) != 0) return -1;
    int64_t need = frames_needed(v, spec, audio_frames, have, err, cap);
    if (need >= 0 && dim != v->dim) {
        snprintf(err, cap, "%s: %lld values a frame where the list's first matrix has %lld", spec, (long long)dim,
                 (long long)v->dim);
        need = -1;
    }
    for (int64_t t = 0; t < need; t++)
        put_bytes(v, used, x + (t < have ? t : have - 1) * dim, (size_t)dim * sizeof(float));
    free(x);
    if (need < 0) return -1;
    *frames = need;
    return 0;
}

int prepare_visual_scan(prepare_visual_t *v, const char *path, int64_t audio_frames, int64_t *frames, int64_t *bytes,
                        char *err, size_t cap) {
    size_t used = 0;
    if ((v->features ? encode_features : encode_video)(v, path, audio_frames, frames, &used, err, cap) != 0) return -1;
    if (fwrite(v->utt, 1, used, v->spool) != used)
        spk_die(SPK_EXIT_FAILURE, "%s: cannot spool %zu bytes of visual frames beside the output (%s)", path, used,
                strerror(errno));
    *bytes = (int64_t)used;
    v->total_frames += *frames;
    v->total_bytes += (int64_t)used;
    return 0;
}

void prepare_visual_agree_width(prepare_visual_t *v, const comm_t *comm, const char *const *specs, int64_t n) {
    if (!v->features) return;
    int64_t dim = 0;
    for (int64_t i = 0; comm->rank == 0 && i < n && !dim; i++) {  // (a matrix too wide is refused below)
        float *x = NULL;
        int64_t rows;
        char err[1024];
        if (matrix_read(specs[i], &x, &rows, &dim, err, sizeof err) != 0) dim = 0;
        free(x);
    }
    comm_bcast(comm, &dim, 1, MPI_INT64_T, 0);
    if (dim > DATASET_MAX_DIM)
        spk_fail_all(SPK_EXIT_DATA, "%s: %lld values a frame, more than the %d a dataset's visual stream holds",
                     specs ? specs[0] : "--visual-scp", (long long)dim, DATASET_MAX_DIM);
    v->dim = dim;
}

void prepare_visual_write(prepare_visual_t *v, dataset_writer_t *w, const comm_t *comm, const int64_t *frames,
                          const int64_t *bytes, const int64_t *rows, int64_t n, int64_t first, int64_t buffer_bytes) {
    int64_t kept = 0, unit0 = 0;  // this rank's first row (features) or byte (pictures) in the file
    int64_t *kf = mallocCheck((size_t)(n ? n : 1) * sizeof(int64_t)),
            *kb = mallocCheck((size_t)(n ? n : 1) * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) {
        if (rows[i] == 0) continue;
        if (i < first) unit0 += v->features ? frames[i] : bytes[i];
        kf[kept] = frames[i];
        kb[kept++] = bytes[i];
    }
    const double audio_rate = v->audio_rate, fps = audio_rate / (double)v->ratio;  // (the ratio exact in the file)
    int64_t unit = 1;                                                              // bytes per written unit
    if (v->features) {
        dataset_writer_add_visual(w, v->dim, fps, audio_rate, kf);
        unit = v->dim * (int64_t)sizeof(float);
    } else {
        dataset_writer_add_pictures(w, v->spec.size, v->spec.channels, fps, audio_rate, kf, kb);
    }
    free(kf);
    free(kb);
    if (fflush(v->spool) != 0 || fseek(v->spool, 0, SEEK_SET) != 0)
        spk_die(SPK_EXIT_FAILURE, "cannot read back the spooled visual frames (%s)", strerror(errno));
    const int64_t per_round = buffer_bytes / unit > 0 ? buffer_bytes / unit : 1;  // units a round
    uint8_t *buf = mallocCheck((size_t)(per_round * unit));
    int64_t left = v->total_bytes / unit;
    for (int more = 1; more;) {
        const int64_t m = left < per_round ? left : per_round;
        if (m > 0 && fread(buf, (size_t)unit, (size_t)m, v->spool) != (size_t)m)
            spk_die(SPK_EXIT_FAILURE, "cannot read back the spooled visual frames (%s)",
                    ferror(v->spool) ? strerror(errno) : "the spool file is short");
        if (v->features)
            dataset_writer_put_visual_rows(w, unit0, m, (const float *)buf);
        else
            dataset_writer_put_jpeg(w, unit0, m, buf);
        unit0 += m;
        left -= m;
        int mine = left > 0;
        SPK_COLLECTIVE("an exchange of prepare's visual frames", MPI_Iallreduce, &mine, &more, 1, MPI_INT, MPI_MAX,
                       comm->world);
    }
    free(buf);
}
