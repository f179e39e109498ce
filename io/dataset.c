#include "io/dataset.h"

#include "kernels/base/check.h"
#include "io/fbank.h"
#include "io/h5util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Rank 0 checks the contract and reads the small metadata; the verdict and the arrays are
// broadcast, so a bad file gives one message and a clean exit on every rank.
typedef struct {
    int variable;
    int64_t dim, rows, fixed_frames;
} shape_t;

typedef struct {
    int code;  // 0 = fine, else an spk_exit code
    char msg[900];
    int64_t num_utts, num_speakers, visual_ratio;
    int has_visual;
    shape_t audio, visual;
    int64_t sample_rate, frame_length, frame_shift;  // audio datasets
    double frame_length_ms, frame_shift_ms;
} header_t;

static int bad(header_t *h, const char *fmt, ...) SPK_PRINTF(2, 3);
static int bad(header_t *h, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->msg, sizeof h->msg, fmt, ap);
    va_end(ap);
    h->code = SPK_EXIT_DATA;
    return -1;
}

// The shape of <group>features (and <group>offsets when variable). num_utts is filled when
// *num_utts < 0, else checked.
static int check_stream(hid_t f, const char *path, const char *group, int64_t dim, int64_t *num_utts, shape_t *sh,
                        header_t *h) {
    char name[64], oname[64];
    snprintf(name, sizeof name, "%sfeatures", group);
    snprintf(oname, sizeof oname, "%soffsets", group);
    hsize_t dims[4];
    int rank = h5_dataset_shape(f, name, dims, 3);
    if (rank < 0) return bad(h, "%s: dataset '/%s' is missing", path, name);
    if (rank != 2 && rank != 3) return bad(h, "%s: dataset '/%s' must have shape [N, T, F] or [total_frames, F]", path, name);
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t t = H5Dget_type(d);
    int is_float = H5Tget_class(t) == H5T_FLOAT;
    H5Tclose(t);
    H5Dclose(d);
    if (!is_float) return bad(h, "%s: dataset '/%s' must hold floating-point values", path, name);
    if ((int64_t)dims[rank - 1] != dim)
        return bad(h, "%s: the last dimension of '/%s' differs from attribute feature_dim", path, name);
    sh->dim = dim;
    sh->variable = rank == 2;
    int64_t n;
    if (sh->variable) {
        hsize_t od[2];
        if (h5_dataset_shape(f, oname, od, 1) != 1 || od[0] < 2)
            return bad(h, "%s: variable-length '/%s' needs a 1-D dataset '/%s' of N+1 int64", path, name, oname);
        n = (int64_t)od[0] - 1;
        sh->rows = (int64_t)dims[0];
    } else {
        n = (int64_t)dims[0];
        sh->fixed_frames = (int64_t)dims[1];
        if (n < 1 || sh->fixed_frames < 1) return bad(h, "%s: dataset '/%s' is empty", path, name);
    }
    if (*num_utts < 0) *num_utts = n;
    else if (n != *num_utts)
        return bad(h, "%s: '/%s' holds %lld utterances, '/features' %lld", path, name, (long long)n, (long long)*num_utts);
    return 0;
}

// An audio dataset: /audio int16 samples, /offsets in samples, the fbank's mel bins as
// feature_dim and its frame geometry from sample_rate (and frame_length_ms, frame_shift_ms).
static int check_audio(hid_t f, const char *path, header_t *h) {
    double len_ms = 25.0, shift_ms = 10.0;
    if (h5_attr_read_i64(f, "sample_rate", &h->sample_rate) != 0 || h->sample_rate <= 0)
        return bad(h, "%s: audio dataset: attribute 'sample_rate' is missing or not a positive integer", path);
    if (h5_attr_exists(f, "frame_length_ms") && h5_attr_read_f64(f, "frame_length_ms", &len_ms) != 0) len_ms = 0;
    if (h5_attr_exists(f, "frame_shift_ms") && h5_attr_read_f64(f, "frame_shift_ms", &shift_ms) != 0) shift_ms = 0;
    h->frame_length_ms = len_ms;
    h->frame_shift_ms = shift_ms;
    h->frame_length = fbank_samples_of_ms((int)h->sample_rate, len_ms);
    h->frame_shift = fbank_samples_of_ms((int)h->sample_rate, shift_ms);
    if (h->frame_length < 2 || h->frame_shift < 1)
        return bad(h, "%s: audio dataset: frames of %g ms every %g ms are too short at %lld Hz", path, len_ms, shift_ms,
                   (long long)h->sample_rate);
    hsize_t dims[2], od[2];
    if (h5_dataset_shape(f, "audio", dims, 1) != 1) return bad(h, "%s: dataset '/audio' (int16 [total_samples]) is missing or not 1-D", path);
    hid_t d = H5Dopen2(f, "audio", H5P_DEFAULT);
    hid_t t = H5Dget_type(d);
    int is_int = H5Tget_class(t) == H5T_INTEGER;
    H5Tclose(t);
    H5Dclose(d);
    if (!is_int) return bad(h, "%s: dataset '/audio' must hold integer (int16) samples", path);
    if (h5_dataset_shape(f, "offsets", od, 1) != 1 || od[0] < 2)
        return bad(h, "%s: '/audio' needs a 1-D dataset '/offsets' of N+1 int64", path);
    h->num_utts = (int64_t)od[0] - 1;
    h->audio.variable = 1;
    h->audio.rows = (int64_t)dims[0];
    return 0;
}

static int check_header(hid_t f, const char *path, header_t *h) {
    char fmt[64];
    int64_t version;
    int audio = 0;
    if (h5_attr_read_str(f, "spkddp_format", fmt, sizeof fmt) != 0 ||
        (strcmp(fmt, DATASET_FORMAT) != 0 && !(audio = strcmp(fmt, DATASET_FORMAT_AUDIO) == 0)))
        return bad(h, "%s: root attribute 'spkddp_format' must be the string \"features\" or \"audio\"", path);
    if (h5_attr_read_i64(f, "version", &version) != 0 || version != DATASET_VERSION)
        return bad(h, "%s: attribute 'version' must be 1 (this spkddp reads dataset format version 1)", path);
    if (h5_attr_read_i64(f, "feature_dim", &h->audio.dim) != 0 || h->audio.dim <= 0)
        return bad(h, "%s: attribute 'feature_dim' is missing or not a positive integer", path);
    if (h5_attr_read_i64(f, "num_speakers", &h->num_speakers) != 0 || h->num_speakers <= 0)
        return bad(h, "%s: attribute 'num_speakers' is missing or not a positive integer", path);
    h->num_utts = -1;
    if (audio ? check_audio(f, path, h) : check_stream(f, path, "", h->audio.dim, &h->num_utts, &h->audio, h)) return -1;
    hsize_t ld[2];
    if (h5_dataset_shape(f, "labels", ld, 1) != 1) return bad(h, "%s: dataset '/labels' (int32 [N]) is missing or not 1-D", path);
    if ((int64_t)ld[0] != h->num_utts) return bad(h, "%s: '/labels' has a different length than the number of utterances", path);
    if (!h5_exists(f, "visual")) return 0;
    if (audio) return bad(h, "%s: an audio dataset cannot have a '/visual' stream", path);

    // The visual stream: its own feature_dim and frame rate; the audio's rate must be an
    // integer multiple, so crops of both streams line up frame for frame.
    hid_t g = H5Gopen2(f, "visual", H5P_DEFAULT);
    double arate = DATASET_AUDIO_RATE, vrate = 0;
    int64_t vdim = 0;
    int ok = g >= 0 && h5_attr_read_i64(g, "feature_dim", &vdim) == 0 && vdim > 0 &&
             h5_attr_read_f64(g, "frame_rate", &vrate) == 0 && vrate > 0;
    if (g >= 0) H5Gclose(g);
    if (!ok) return bad(h, "%s: group '/visual' needs attributes feature_dim and frame_rate (frames per second)", path);
    if (h5_attr_exists(f, "frame_rate")) h5_attr_read_f64(f, "frame_rate", &arate);
    double ratio = arate / vrate;
    if (ratio < 1 || ratio != (double)(int64_t)ratio)
        return bad(h, "%s: audio frame_rate %g is not an integer multiple of '/visual' frame_rate %g", path, arate, vrate);
    h->visual_ratio = (int64_t)ratio;
    h->has_visual = 1;
    return check_stream(f, path, "visual/", vdim, &h->num_utts, &h->visual, h);
}

// Offsets start at 0, grow strictly and end at the row count.
static int check_offsets(const char *path, const char *name, const int64_t *off, int64_t n, int64_t rows, header_t *h) {
    if (off[0] != 0) return bad(h, "%s: '%s' must start at 0", path, name);
    for (int64_t i = 0; i < n; i++)
        if (off[i + 1] <= off[i])
            return bad(h, "%s: '%s' is not strictly increasing at index %lld (%lld -> %lld)", path, name, (long long)i,
                       (long long)off[i], (long long)off[i + 1]);
    if (off[n] != rows) return bad(h, "%s: the last entry of '%s' differs from the number of rows of its features", path, name);
    return 0;
}

static void fill_offsets(stream_t *s, const shape_t *sh, int64_t n) {
    if (!sh->variable)
        for (int64_t i = 0; i <= n; i++) s->offsets[i] = i * sh->fixed_frames;
}

// An audio dataset's /offsets count samples; its frame offsets are the fbank frames of each
// utterance, which must have at least one.
static int audio_frames(const char *path, header_t *h, dataset_t *ds) {
    const int64_t n = h->num_utts;
    int64_t *frames = ds->audio.offsets;
    frames[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t samples = ds->wave.offsets[i + 1] - ds->wave.offsets[i];
        int64_t t = fbank_frames_of(samples, h->frame_length, h->frame_shift);
        if (t < 1)
            return bad(h, "%s: utterance %lld has %lld samples, less than one %lld-sample frame", path, (long long)i,
                       (long long)samples, (long long)h->frame_length);
        frames[i + 1] = frames[i] + t;
    }
    return 0;
}

static int check_arrays(const char *path, header_t *h, dataset_t *ds) {
    const int64_t n = h->num_utts;
    if (h->sample_rate > 0) {
        if (check_offsets(path, "/offsets", ds->wave.offsets, n, h->audio.rows, h) || audio_frames(path, h, ds)) return -1;
    } else if (h->audio.variable && check_offsets(path, "/offsets", ds->audio.offsets, n, h->audio.rows, h)) return -1;
    for (int64_t i = 0; i < n; i++)
        if (ds->labels[i] < 0 || ds->labels[i] >= h->num_speakers)
            return bad(h, "%s: '/labels'[%lld] = %d is outside [0, num_speakers=%lld)", path, (long long)i, ds->labels[i],
                       (long long)h->num_speakers);
    if (!h->has_visual) return 0;
    if (h->visual.variable && check_offsets(path, "/visual/offsets", ds->visual.offsets, n, h->visual.rows, h)) return -1;
    for (int64_t i = 0; i < n; i++)
        if (stream_frames(&ds->visual, i) < stream_frames(&ds->audio, i) / h->visual_ratio)
            return bad(h, "%s: utterance %lld has %lld visual frames, its %lld audio frames need %lld", path, (long long)i,
                       (long long)stream_frames(&ds->visual, i), (long long)stream_frames(&ds->audio, i),
                       (long long)(stream_frames(&ds->audio, i) / h->visual_ratio));
    return 0;
}

static void stream_open(dataset_t *ds, stream_t *s, const char *name, const shape_t *sh) {
    snprintf(s->name, sizeof s->name, "/%s", name);
    s->variable = sh->variable;
    s->dim = sh->dim;
    s->mem_type = H5T_NATIVE_FLOAT;
    s->features = h5Check(H5Dopen2(ds->file, name, H5P_DEFAULT), "%s: cannot open '/%s'", ds->path, name);
}

void dataset_open(dataset_t *ds, const char *path, MPI_Comm comm) {
    int rank;
    mpiCheck(MPI_Comm_rank(comm, &rank));
    memset(ds, 0, sizeof *ds);
    snprintf(ds->path, sizeof ds->path, "%s", path);
    h5_quiet();

    header_t h = {0};
    if (rank == 0) {
        if (access(path, R_OK) != 0) bad(&h, "%s: cannot read the dataset file (%s)", path, strerror(errno));
        else if (H5Fis_hdf5(path) <= 0) bad(&h, "%s: not an HDF5 file", path);
    }
    mpiCheck(MPI_Bcast(&h, sizeof h, MPI_BYTE, 0, comm));
    if (h.code) spk_fail_all(h.code, "%s", h.msg);

    hid_t fapl = h5Check(H5Pcreate(H5P_FILE_ACCESS), "%s: cannot create file access properties", path);
    h5Check(H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL), "%s: cannot select the MPI-IO driver", path);
    ds->file = h5Check(H5Fopen(path, H5F_ACC_RDONLY, fapl), "%s: cannot open with MPI-IO", path);
    H5Pclose(fapl);

    if (rank == 0 && check_header(ds->file, path, &h) == 0) {
        int64_t n = h.num_utts;
        ds->audio.offsets = mallocCheck((size_t)(n + 1) * sizeof(int64_t));
        ds->visual.offsets = mallocCheck((size_t)(n + 1) * sizeof(int64_t));
        ds->wave.offsets = mallocCheck((size_t)(n + 1) * sizeof(int64_t));
        ds->labels = mallocCheck((size_t)n * sizeof(int32_t));
        h5_read_array(ds->file, "labels", H5T_NATIVE_INT32, ds->labels, path);
        if (h.sample_rate > 0) h5_read_array(ds->file, "offsets", H5T_NATIVE_INT64, ds->wave.offsets, path);
        else if (h.audio.variable) h5_read_array(ds->file, "offsets", H5T_NATIVE_INT64, ds->audio.offsets, path);
        if (h.has_visual && h.visual.variable) h5_read_array(ds->file, "visual/offsets", H5T_NATIVE_INT64, ds->visual.offsets, path);
        fill_offsets(&ds->audio, &h.audio, n);
        if (h.has_visual) fill_offsets(&ds->visual, &h.visual, n);
        check_arrays(path, &h, ds);
    }
    mpiCheck(MPI_Bcast(&h, sizeof h, MPI_BYTE, 0, comm));
    if (h.code) {
        H5Fclose(ds->file);
        spk_fail_all(h.code, "%s", h.msg);
    }
    const int64_t n = h.num_utts;
    ds->num_utts = n;
    ds->num_speakers = h.num_speakers;
    ds->feature_dim = h.audio.dim;
    if (rank != 0) {
        ds->audio.offsets = mallocCheck((size_t)(n + 1) * sizeof(int64_t));
        ds->visual.offsets = mallocCheck((size_t)(n + 1) * sizeof(int64_t));
        ds->wave.offsets = mallocCheck((size_t)(n + 1) * sizeof(int64_t));
        ds->labels = mallocCheck((size_t)n * sizeof(int32_t));
    }
    mpiCheck(MPI_Bcast(ds->audio.offsets, (int)(n + 1), MPI_INT64_T, 0, comm));
    mpiCheck(MPI_Bcast(ds->labels, (int)n, MPI_INT32_T, 0, comm));
    if (h.sample_rate > 0) {  // the samples; /features is computed from them (ds->audio has offsets only)
        mpiCheck(MPI_Bcast(ds->wave.offsets, (int)(n + 1), MPI_INT64_T, 0, comm));
        snprintf(ds->audio.name, sizeof ds->audio.name, "/features");
        ds->audio.variable = 1;
        ds->audio.dim = h.audio.dim;
        stream_open(ds, &ds->wave, "audio", &(shape_t){.variable = 1, .dim = 1});
        ds->wave.mem_type = H5T_NATIVE_INT16;
        ds->wave.samples = 1;
        ds->sample_rate = h.sample_rate;
        ds->frame_length = h.frame_length;
        ds->frame_shift = h.frame_shift;
        ds->frame_length_ms = h.frame_length_ms;
        ds->frame_shift_ms = h.frame_shift_ms;
    } else {
        stream_open(ds, &ds->audio, "features", &h.audio);
    }
    if (h.has_visual) {
        mpiCheck(MPI_Bcast(ds->visual.offsets, (int)(n + 1), MPI_INT64_T, 0, comm));
        stream_open(ds, &ds->visual, "visual/features", &h.visual);
        ds->visual_ratio = h.visual_ratio;
    }
    ds->dxpl = h5Check(H5Pcreate(H5P_DATASET_XFER), "%s: cannot create transfer properties", path);
    h5Check(H5Pset_dxpl_mpio(ds->dxpl, H5FD_MPIO_COLLECTIVE), "%s: cannot request collective I/O", path);
}

void dataset_close(dataset_t *ds) {
    if (ds->dxpl > 0) H5Pclose(ds->dxpl);
    if (ds->audio.features > 0) H5Dclose(ds->audio.features);
    if (ds->visual.features > 0) H5Dclose(ds->visual.features);
    if (ds->wave.features > 0) H5Dclose(ds->wave.features);
    if (ds->file > 0) H5Fclose(ds->file);
    free(ds->audio.offsets);
    free(ds->visual.offsets);
    free(ds->wave.offsets);
    free(ds->labels);
    free(ds->stage);
    free(ds->order);
    free(ds->stage_at);
    memset(ds, 0, sizeof *ds);
}
