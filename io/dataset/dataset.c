#include "io/dataset/dataset.h"

#include "io/common/err_text.h"

#include "io/audio/fbank.h"
#include "io/common/h5util.h"
#include "io/dataset/utt_ids.h"
#include "kernels/base/check.h"
#include "kernels/base/mpi_wait.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

// ---- the contract (rank 0, serial) ---------------------------------------------------------

typedef err_text_t ctx_t;
#define bad(c, ...) err_text_fail(c, SPK_EXIT_DATA, __VA_ARGS__)

// An integer attribute of `where` ("root", "group '/visual'") in [lo, hi].
static int int_attr(const ctx_t *c, hid_t loc, const char *where, const char *name, int64_t lo, int64_t hi,
                    int64_t *out) {
    int rc = h5_attr_read_i64(loc, name, out);
    if (rc == H5U_WRONG_TYPE) return bad(c, "%s attribute '%s' must be one integer", where, name);
    if (rc)
        return bad(c, "%s attribute '%s' %s (an integer in [%lld, %lld])", where, name, h5_status_str(rc),
                   (long long)lo, (long long)hi);
    if (*out < lo || *out > hi)
        return bad(c, "%s attribute '%s' = %lld is outside [%lld, %lld]", where, name, (long long)*out, (long long)lo,
                   (long long)hi);
    return 0;
}

// A frame rate: a finite positive number.
static int rate_attr(const ctx_t *c, hid_t loc, const char *where, const char *name, double *out) {
    int rc = h5_attr_read_f64(loc, name, out);
    if (rc) return bad(c, "%s attribute '%s' %s (frames per second)", where, name, h5_status_str(rc));
    if (!(isfinite(*out) && *out > 0))
        return bad(c, "%s attribute '%s' = %g must be a positive number of frames per second", where, name, *out);
    return 0;
}

// A dataset named `name` that exists, is stored, and has rank `rank` (0: 2 or 3) and class cls.
static int dataset_of(const ctx_t *c, hid_t f, const char *name, int rank, H5T_class_t cls, const char *what,
                      h5_info_t *in) {
    int rc = h5_dataset_info(f, name, in);
    if (rc == H5U_MISSING) return bad(c, "dataset '/%s' is missing (%s)", name, what);
    if (rc) return bad(c, "'/%s' must be a dataset (%s)", name, what);
    if (rank ? in->rank != rank : in->rank != 2 && in->rank != 3)
        return bad(c, "dataset '/%s' must have shape %s", name, what);
    if (in->cls != cls)
        return bad(c, "dataset '/%s' must hold %s (%s)", name,
                   cls == H5T_FLOAT     ? "floating-point values"
                   : cls == H5T_INTEGER ? "integers"
                                        : "strings",
                   what);
    if (!in->stored)
        return bad(c, "dataset '/%s' declares %llu values but does not store them all (a truncated or unfinished file)",
                   name, (unsigned long long)in->npoints);
    return 0;
}

// <group>features (and <group>offsets when variable length). num_utts is filled when
// *num_utts < 0, else checked.
static int check_stream(const ctx_t *c, hid_t f, const char *group, int64_t dim, int64_t *num_utts,
                        dataset_shape_t *sh) {
    char name[64], oname[64];
    snprintf(name, sizeof name, "%sfeatures", group);
    snprintf(oname, sizeof oname, "%soffsets", group);
    h5_info_t in;
    int rc = dataset_of(c, f, name, 0, H5T_FLOAT, "[N, T, F] or [total_frames, F]", &in);
    if (rc) return rc;
    if ((int64_t)in.dims[in.rank - 1] != dim)
        return bad(c, "the last dimension of '/%s' (%llu) differs from attribute feature_dim (%lld)", name,
                   (unsigned long long)in.dims[in.rank - 1], (long long)dim);
    sh->dim = dim;
    sh->variable = in.rank == 2;
    int64_t n;
    if (sh->variable) {
        h5_info_t on;
        if ((rc = dataset_of(c, f, oname, 1, H5T_INTEGER, "N+1 frame offsets of the variable-length features", &on)))
            return rc;
        if (on.dims[0] < 2)
            return bad(c, "'/%s' has %llu entries: the dataset holds no utterances", oname,
                       (unsigned long long)on.dims[0]);
        n = (int64_t)on.dims[0] - 1;
        sh->rows = (int64_t)in.dims[0];
    } else {
        n = (int64_t)in.dims[0];
        sh->fixed_frames = (int64_t)in.dims[1];
        if (n < 1) return bad(c, "dataset '/%s' holds no utterances", name);
        if (sh->fixed_frames < 1) return bad(c, "dataset '/%s' has utterances of 0 frames", name);
    }
    if (n > DATASET_MAX_UTTS)
        return bad(c, "'/%s' holds %lld utterances, more than the %lld spkddp reads", name, (long long)n,
                   (long long)DATASET_MAX_UTTS);
    if (*num_utts < 0)
        *num_utts = n;
    else if (n != *num_utts)
        return bad(c, "'/%s' holds %lld utterances, '/features' %lld", name, (long long)n, (long long)*num_utts);
    return 0;
}

// A visual stream of pictures: group attributes encoding "jpeg", image_size, image_channels
// (1 or 3), and feature_dim their product with image_size squared (what a frame becomes).
static int check_pictures_attrs(const ctx_t *c, hid_t g, int64_t vdim, dataset_header_t *h) {
    char enc[32];
    int rc = h5_attr_read_str(g, "encoding", enc, sizeof enc);
    if (rc || strcmp(enc, "jpeg") != 0)
        return bad(c, "group '/visual' attribute 'encoding' must be the string \"jpeg\"");
    if ((rc = int_attr(c, g, "group '/visual'", "image_size", 1, 4096, &h->image_size))) return rc;
    if ((rc = int_attr(c, g, "group '/visual'", "image_channels", 1, 3, &h->image_channels))) return rc;
    if (h->image_channels == 2) return bad(c, "group '/visual' attribute 'image_channels' must be 1 (gray) or 3 (RGB)");
    if (h->image_size * h->image_size * h->image_channels != vdim)
        return bad(c, "group '/visual': feature_dim %lld is not image_size^2 x image_channels = %lld", (long long)vdim,
                   (long long)(h->image_size * h->image_size * h->image_channels));
    return 0;
}

// Its datasets: /visual/jpeg (bytes), /visual/jpeg_offsets and /visual/offsets (N+1 each).
static int check_pictures(const ctx_t *c, hid_t f, int64_t vdim, dataset_header_t *h) {
    h5_info_t in, jo, fo;
    int rc = dataset_of(c, f, "visual/jpeg", 1, H5T_INTEGER, "uint8 JPEG frames [total_bytes]", &in);
    if (!rc) rc = dataset_of(c, f, "visual/jpeg_offsets", 1, H5T_INTEGER, "N+1 byte offsets of the frames", &jo);
    if (!rc) rc = dataset_of(c, f, "visual/offsets", 1, H5T_INTEGER, "N+1 frame offsets of the visual stream", &fo);
    if (rc) return rc;
    if (in.type_size != 1 || in.is_signed) return bad(c, "dataset '/visual/jpeg' must hold bytes (uint8)");
    if ((int64_t)jo.dims[0] != h->num_utts + 1 || (int64_t)fo.dims[0] != h->num_utts + 1)
        return bad(c,
                   "'/visual/jpeg_offsets' and '/visual/offsets' must have %lld entries (one per utterance, and "
                   "the end)",
                   (long long)(h->num_utts + 1));
    h->jpeg_bytes = (int64_t)in.dims[0];
    h->visual = (dataset_shape_t){.variable = 1, .dim = vdim, .rows = -1};
    return 0;
}

// The visual stream: its own feature_dim and frame rate; the audio's rate must be an integer
// multiple, so crops of both streams line up frame for frame.
static int check_visual(const ctx_t *c, hid_t f, dataset_header_t *h) {
    H5O_info_t oi;
    if (H5Oget_info_by_name(f, "visual", &oi, H5P_DEFAULT) < 0 || oi.type != H5O_TYPE_GROUP)
        return bad(c, "'/visual' must be a group holding the visual stream");
    hid_t g = H5Gopen2(f, "visual", H5P_DEFAULT);
    if (g < 0) return bad(c, "group '/visual' cannot be opened");
    double arate = DATASET_AUDIO_RATE, vrate = 0;
    int64_t vdim = 0;
    const int pictures = h5_attr_exists(g, "encoding");
    int rc =
        int_attr(c, g, "group '/visual'", "feature_dim", 1, pictures ? DATASET_MAX_PICTURE : DATASET_MAX_DIM, &vdim);
    if (!rc) rc = rate_attr(c, g, "group '/visual'", "frame_rate", &vrate);
    if (!rc && pictures) rc = check_pictures_attrs(c, g, vdim, h);
    H5Gclose(g);
    if (!rc && h5_attr_exists(f, "frame_rate")) rc = rate_attr(c, f, "root", "frame_rate", &arate);
    if (rc) return rc;
    // (an integer to within rounding: prepare writes the visual rate as the audio's over the ratio)
    const double ratio = arate / vrate, whole = nearbyint(ratio);
    if (!(whole >= 1 && whole <= 1 << 16 && fabs(ratio - whole) <= 1e-9 * whole))
        return bad(c, "audio frame_rate %g is not an integer multiple of '/visual' frame_rate %g", arate, vrate);
    h->visual_ratio = (int64_t)whole;
    h->has_visual = 1;
    return pictures ? check_pictures(c, f, vdim, h) : check_stream(c, f, "visual/", vdim, &h->num_utts, &h->visual);
}

// An audio dataset: /audio integer samples, /offsets in samples, the fbank's mel bins as
// feature_dim and its frame geometry from sample_rate (and frame_length_ms, frame_shift_ms).
static int check_audio(const ctx_t *c, hid_t f, dataset_header_t *h) {
    double len_ms = 25.0, shift_ms = 10.0;
    int rc = int_attr(c, f, "root", "sample_rate", 1, 1 << 20, &h->sample_rate);
    if (!rc && h5_attr_exists(f, "frame_length_ms")) rc = rate_attr(c, f, "root", "frame_length_ms", &len_ms);
    if (!rc && h5_attr_exists(f, "frame_shift_ms")) rc = rate_attr(c, f, "root", "frame_shift_ms", &shift_ms);
    if (rc) return rc;
    if (len_ms > 1000 || shift_ms > 1000)
        return bad(c, "audio dataset: frames of %g ms every %g ms are longer than a second", len_ms, shift_ms);
    h->frame_length_ms = len_ms;
    h->frame_shift_ms = shift_ms;
    h->frame_length = fbank_samples_of_ms((int)h->sample_rate, len_ms);
    h->frame_shift = fbank_samples_of_ms((int)h->sample_rate, shift_ms);
    if (h->frame_length < 2 || h->frame_shift < 1)
        return bad(c, "audio dataset: frames of %g ms every %g ms are too short at %lld Hz", len_ms, shift_ms,
                   (long long)h->sample_rate);
    h5_info_t in, on;
    if ((rc = dataset_of(c, f, "audio", 1, H5T_INTEGER, "integer (int16) samples [total_samples]", &in))) return rc;
    if ((rc = dataset_of(c, f, "offsets", 1, H5T_INTEGER, "N+1 sample offsets of the audio", &on))) return rc;
    if (on.dims[0] < 2)
        return bad(c, "'/offsets' has %llu entries: the dataset holds no utterances", (unsigned long long)on.dims[0]);
    if ((int64_t)on.dims[0] - 1 > DATASET_MAX_UTTS)
        return bad(c, "'/offsets' holds more utterances than the %lld spkddp reads", (long long)DATASET_MAX_UTTS);
    h->num_utts = (int64_t)on.dims[0] - 1;
    h->audio.variable = 1;
    h->audio.rows = (int64_t)in.dims[0];
    return 0;
}

static int check_header(const ctx_t *c, hid_t f, dataset_header_t *h) {
    char fmt[64];
    int64_t version;
    int rc = h5_attr_read_str(f, "spkddp_format", fmt, sizeof fmt);
    if (rc)
        return bad(c, "root attribute 'spkddp_format' %s (must be the string \"features\" or \"audio\")",
                   h5_status_str(rc));
    const int audio = strcmp(fmt, DATASET_FORMAT_AUDIO) == 0;
    if (!audio && strcmp(fmt, DATASET_FORMAT) != 0)
        return bad(c, "root attribute 'spkddp_format' is \"%s\", must be the string \"features\" or \"audio\"", fmt);
    rc = h5_attr_read_i64(f, "version", &version);
    if (rc || version != DATASET_VERSION)
        return bad(c, "root attribute 'version' must be the integer 1 (this spkddp reads dataset format version 1)");
    if ((rc = int_attr(c, f, "root", "feature_dim", 1, DATASET_MAX_DIM, &h->audio.dim))) return rc;
    if ((rc = int_attr(c, f, "root", "num_speakers", 1, DATASET_MAX_SPEAKERS, &h->num_speakers))) return rc;
    double arate;
    if (h5_attr_exists(f, "frame_rate") && (rc = rate_attr(c, f, "root", "frame_rate", &arate))) return rc;
    h->num_utts = -1;
    if ((rc = audio ? check_audio(c, f, h) : check_stream(c, f, "", h->audio.dim, &h->num_utts, &h->audio))) return rc;
    h5_info_t in;
    if ((rc = dataset_of(c, f, "labels", 1, H5T_INTEGER, "integer speaker indices [N]", &in))) return rc;
    if ((int64_t)in.dims[0] != h->num_utts)
        return bad(c, "'/labels' has a different length (%llu) than the number of utterances (%lld)",
                   (unsigned long long)in.dims[0], (long long)h->num_utts);
    return h5_exists(f, "visual") ? check_visual(c, f, h) : 0;
}

// Offsets start at 0, grow strictly and end at the row count.
static int check_offsets(const ctx_t *c, const char *name, const int64_t *off, int64_t n, int64_t rows) {
    if (off[0] != 0) return bad(c, "'%s' must start at 0", name);
    for (int64_t i = 0; i < n; i++)
        if (off[i + 1] <= off[i])
            return bad(c, "'%s' is not strictly increasing at index %lld (%lld -> %lld)", name, (long long)i,
                       (long long)off[i], (long long)off[i + 1]);
    if (rows >= 0 && off[n] != rows)  // (rows < 0: pictures, whose frames are counted by the offsets)
        return bad(c, "the last entry of '%s' (%lld) differs from the number of rows of its features (%lld)", name,
                   (long long)off[n], (long long)rows);
    return 0;
}

static int read_offsets(const ctx_t *c, hid_t f, const char *name, const dataset_shape_t *sh, int64_t n, int64_t *off) {
    if (!sh->variable) {
        for (int64_t i = 0; i <= n; i++) off[i] = i * sh->fixed_frames;
        return 0;
    }
    int rc = h5_read_i64s(f, name, off, (size_t)n + 1);
    if (rc) return bad(c, "'/%s' %s (int64 frame offsets)", name, h5_status_str(rc));
    char shown[64];
    snprintf(shown, sizeof shown, "/%s", name);
    return check_offsets(c, shown, off, n, sh->rows);
}

// Utterance ids, when present: one per utterance, single words, each named once.
static int check_utt_ids(const ctx_t *c, hid_t f, int64_t n) {
    h5_info_t in;
    int rc = h5_dataset_info(f, "utt_ids", &in);
    if (rc == H5U_MISSING) return 0;
    if (rc || in.rank != 1 || in.cls != H5T_STRING || (int64_t)in.dims[0] != n)
        return bad(c, "dataset '/utt_ids' must be %lld strings, one per utterance", (long long)n);
    char **ids = h5_read_strings(f, "utt_ids", n);
    if (!ids) return bad(c, "dataset '/utt_ids' cannot be read");
    utt_index_t ix;
    char why[600];
    rc = utt_index_build(&ix, ids, n, "'/utt_ids'", why, sizeof why);
    if (rc)
        bad(c, "%s", why);
    else
        utt_index_free(&ix);
    h5_free_strings(ids, n);
    return rc;
}

// An audio dataset's /offsets count samples; its frame offsets are the fbank frames of each
// utterance, which must have at least one.
static int audio_frames(const ctx_t *c, hid_t f, dataset_header_t *h) {
    const int64_t n = h->num_utts;
    const dataset_shape_t samples = {.variable = 1, .dim = 1, .rows = h->audio.rows};
    int rc = read_offsets(c, f, "offsets", &samples, n, h->woffsets);
    h->offsets[0] = 0;
    for (int64_t i = 0; i < n && !rc; i++) {
        int64_t have = h->woffsets[i + 1] - h->woffsets[i], t = fbank_frames_of(have, h->frame_length, h->frame_shift);
        if (t < 1)
            rc = bad(c, "utterance %lld has %lld samples, less than one %lld-sample frame", (long long)i,
                     (long long)have, (long long)h->frame_length);
        else
            h->offsets[i + 1] = h->offsets[i] + t;
    }
    return rc;
}

static int check_arrays(const ctx_t *c, hid_t f, dataset_header_t *h) {
    const int64_t n = h->num_utts;
    int64_t *lab = mallocCheck((size_t)n * sizeof(int64_t));
    int rc = h5_read_i64s(f, "labels", lab, (size_t)n);
    if (rc) rc = bad(c, "'/labels' %s (integer speaker indices)", h5_status_str(rc));
    for (int64_t i = 0; i < n && !rc; i++) {
        if (lab[i] < 0 || lab[i] >= h->num_speakers)
            rc = bad(c, "'/labels'[%lld] = %lld is outside [0, num_speakers=%lld)", (long long)i, (long long)lab[i],
                     (long long)h->num_speakers);
        h->labels[i] = (int32_t)lab[i];
    }
    free(lab);
    if (!rc && h->sample_rate > 0)
        rc = audio_frames(c, f, h);
    else if (!rc)
        rc = read_offsets(c, f, "offsets", &h->audio, n, h->offsets);
    if (!rc && h->has_visual) rc = read_offsets(c, f, "visual/offsets", &h->visual, n, h->voffsets);
    if (!rc && h->image_size)
        rc = read_offsets(c, f, "visual/jpeg_offsets",
                          &(dataset_shape_t){.variable = 1, .dim = 1, .rows = h->jpeg_bytes}, n, h->joffsets);
    for (int64_t i = 0; i < n && h->has_visual && !rc; i++) {
        int64_t a = h->offsets[i + 1] - h->offsets[i], v = h->voffsets[i + 1] - h->voffsets[i];
        if (v < a / h->visual_ratio)
            rc = bad(c, "utterance %lld has %lld visual frames, its %lld audio frames need %lld", (long long)i,
                     (long long)v, (long long)a, (long long)(a / h->visual_ratio));
    }
    return rc ? rc : check_utt_ids(c, f, n);
}

int dataset_check(hid_t f, const char *path, dataset_header_t *h, char *err, size_t cap) {
    const ctx_t c = {path, err, cap};
    memset(h, 0, sizeof *h);
    int rc = check_header(&c, f, h);
    if (rc) return rc;
    const int64_t n = h->num_utts;
    h->labels = mallocCheck((size_t)n * sizeof(int32_t));
    h->offsets = mallocCheck((size_t)(n + 1) * sizeof(int64_t));
    h->voffsets = mallocCheck((size_t)(n + 1) * sizeof(int64_t));
    h->woffsets = mallocCheck((size_t)(n + 1) * sizeof(int64_t));
    h->joffsets = mallocCheck((size_t)(n + 1) * sizeof(int64_t));
    rc = check_arrays(&c, f, h);
    if (rc) dataset_header_free(h);
    return rc;
}

void dataset_header_free(dataset_header_t *h) {
    free(h->labels);
    free(h->offsets);
    free(h->voffsets);
    free(h->woffsets);
    free(h->joffsets);
    h->labels = NULL;
    h->offsets = h->voffsets = h->woffsets = h->joffsets = NULL;
}

// ---- open (collective) -----------------------------------------------------------------

// What rank 0 broadcasts: the verdict and the scalars (the arrays follow).
typedef struct {
    int code;
    char msg[1024];
    dataset_header_t h;
} verdict_t;

// Rank 0: the file opens, and holds the contract.
static void check_on_rank0(const char *path, verdict_t *v) {
    const ctx_t c = {path, v->msg, sizeof v->msg};
    if (access(path, R_OK) != 0) {
        v->code = bad(&c, "cannot read the dataset file (%s)", strerror(errno));
        return;
    }
    hid_t f = H5Fis_hdf5(path) > 0 ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
    if (f < 0) {
        v->code = bad(&c, "not an HDF5 file (or a truncated one)");
        return;
    }
    v->code = dataset_check(f, path, &v->h, v->msg, sizeof v->msg);
    H5Fclose(f);
}

static void stream_open(dataset_t *ds, stream_t *s, const char *name, const dataset_shape_t *sh) {
    snprintf(s->name, sizeof s->name, "/%s", name);
    s->variable = sh->variable;
    s->dim = sh->dim;
    s->mem_type = H5T_NATIVE_FLOAT;
    s->features = h5Check(H5Dopen2(ds->file, name, H5P_DEFAULT), "%s: cannot open '/%s'", ds->path, name);
}

// A stream computed from a stored 1-D one (fbank frames from /audio samples, pictures from
// /visual/jpeg bytes): `derived` has offsets only, `stored` holds mem_type values.
static void open_derived(dataset_t *ds, stream_t *derived, const char *derived_name, int64_t dim, stream_t *stored,
                         const char *stored_name, hid_t mem_type) {
    snprintf(derived->name, sizeof derived->name, "%s", derived_name);
    derived->variable = 1;
    derived->dim = dim;
    stream_open(ds, stored, stored_name, &(dataset_shape_t){.variable = 1, .dim = 1});
    stored->mem_type = mem_type;
    stored->samples = 1;
}

void dataset_open(dataset_t *ds, const char *path, MPI_Comm comm) {
    int rank;
    mpiCheck(MPI_Comm_rank(comm, &rank));
    memset(ds, 0, sizeof *ds);
    snprintf(ds->path, sizeof ds->path, "%s", path);
    h5_quiet();

    verdict_t *v = callocCheck(1, sizeof *v);
    if (rank == 0) check_on_rank0(path, v);
    int32_t *labels = v->h.labels;
    int64_t *offsets = v->h.offsets, *voffsets = v->h.voffsets, *woffsets = v->h.woffsets, *joffsets = v->h.joffsets;
    SPK_COLLECTIVE("the broadcast of the dataset's index", MPI_Ibcast, v, sizeof *v, MPI_BYTE, 0, comm);
    if (v->code) spk_fail_all(v->code, "%s", v->msg);
    const dataset_header_t *h = &v->h;
    const int64_t n = h->num_utts;
    if (rank != 0) {
        labels = mallocCheck((size_t)n * sizeof(int32_t));
        offsets = mallocCheck((size_t)(n + 1) * sizeof(int64_t));
        voffsets = mallocCheck((size_t)(n + 1) * sizeof(int64_t));
        woffsets = mallocCheck((size_t)(n + 1) * sizeof(int64_t));
        joffsets = mallocCheck((size_t)(n + 1) * sizeof(int64_t));
    }
    SPK_COLLECTIVE("the broadcast of the dataset's index", MPI_Ibcast, labels, (int)n, MPI_INT32_T, 0, comm);
    SPK_COLLECTIVE("the broadcast of the dataset's index", MPI_Ibcast, offsets, (int)(n + 1), MPI_INT64_T, 0, comm);
    if (h->has_visual)
        SPK_COLLECTIVE("the broadcast of the dataset's index", MPI_Ibcast, voffsets, (int)(n + 1), MPI_INT64_T, 0,
                       comm);
    if (h->sample_rate > 0)
        SPK_COLLECTIVE("the broadcast of the dataset's index", MPI_Ibcast, woffsets, (int)(n + 1), MPI_INT64_T, 0,
                       comm);
    if (h->image_size)
        SPK_COLLECTIVE("the broadcast of the dataset's index", MPI_Ibcast, joffsets, (int)(n + 1), MPI_INT64_T, 0,
                       comm);
    ds->jpeg.offsets = joffsets;
    ds->labels = labels;
    ds->audio.offsets = offsets;
    ds->visual.offsets = voffsets;
    ds->wave.offsets = woffsets;
    ds->num_utts = n;
    ds->num_speakers = h->num_speakers;
    ds->feature_dim = h->audio.dim;

    hid_t fapl = h5Check(H5Pcreate(H5P_FILE_ACCESS), "%s: cannot create file access properties", path);
    h5Check(H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL), "%s: cannot select the MPI-IO driver", path);
    ds->file = h5Check(H5Fopen(path, H5F_ACC_RDONLY, fapl), "%s: cannot open with MPI-IO", path);
    H5Pclose(fapl);
    if (h->sample_rate > 0) {  // the samples; /features is computed from them (ds->audio has offsets only)
        open_derived(ds, &ds->audio, "/features", h->audio.dim, &ds->wave, "audio", H5T_NATIVE_INT16);
        ds->sample_rate = h->sample_rate;
        ds->frame_length = h->frame_length;
        ds->frame_shift = h->frame_shift;
        ds->frame_length_ms = h->frame_length_ms;
        ds->frame_shift_ms = h->frame_shift_ms;
    } else {
        stream_open(ds, &ds->audio, "features", &h->audio);
    }
    if (h->image_size) {  // pictures: the frames are decoded from /visual/jpeg (ds->visual has offsets only)
        open_derived(ds, &ds->visual, "/visual", h->visual.dim, &ds->jpeg, "visual/jpeg", H5T_NATIVE_UINT8);
        ds->image_size = h->image_size;
        ds->image_channels = h->image_channels;
    } else if (h->has_visual) {
        stream_open(ds, &ds->visual, "visual/features", &h->visual);
    }
    ds->visual_ratio = h->visual_ratio;
    // Collective reads let MPI-IO merge the ranks' requests into large ones (two-phase I/O), which
    // parallel file systems need. Inside, each is a handful of blocking collectives that spin:
    // on a node with more ranks than cores every one waits for a descheduled rank, and a
    // 3-rank run on 2 cores spent most of its time there. There, each rank reads on its own.
    int ranks;
    mpiCheck(MPI_Comm_size(comm, &ranks));
    const int collective = !(ranks > 1 && spk_wait_policy(spk_ranks_on_node(comm)).sleepy);
    ds->dxpl = h5Check(H5Pcreate(H5P_DATASET_XFER), "%s: cannot create transfer properties", path);
    h5Check(H5Pset_dxpl_mpio(ds->dxpl, collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT),
            "%s: cannot select the MPI-IO transfer mode", path);
    free(v);
}

uint64_t dataset_fingerprint(const dataset_t *ds) {
    const int64_t n = ds->num_utts;
    int64_t sizes[5] = {n, ds->num_speakers, ds->feature_dim, ds->visual.dim, ds->visual_ratio};
    XXH3_state_t *s = XXH3_createState();
    if (!s) spk_die(SPK_EXIT_FAILURE, "out of memory for a dataset fingerprint");
    XXH3_64bits_reset(s);
    XXH3_64bits_update(s, sizes, sizeof sizes);
    XXH3_64bits_update(s, ds->audio.offsets, (size_t)(n + 1) * sizeof(int64_t));
    XXH3_64bits_update(s, ds->labels, (size_t)n * sizeof(int32_t));
    if (ds->visual.dim > 0) XXH3_64bits_update(s, ds->visual.offsets, (size_t)(n + 1) * sizeof(int64_t));
    if (ds->image_size) XXH3_64bits_update(s, ds->jpeg.offsets, (size_t)(n + 1) * sizeof(int64_t));
    uint64_t h = XXH3_64bits_digest(s);
    XXH3_freeState(s);
    return h;
}

void dataset_close(dataset_t *ds) {
    if (ds->dxpl > 0) H5Pclose(ds->dxpl);
    if (ds->audio.features > 0) H5Dclose(ds->audio.features);
    if (ds->visual.features > 0) H5Dclose(ds->visual.features);
    if (ds->wave.features > 0) H5Dclose(ds->wave.features);
    if (ds->jpeg.features > 0) H5Dclose(ds->jpeg.features);
    if (ds->file > 0) H5Fclose(ds->file);
    free(ds->audio.offsets);
    free(ds->visual.offsets);
    free(ds->wave.offsets);
    free(ds->jpeg.offsets);
    free(ds->labels);
    free(ds->stage);
    free(ds->order);
    free(ds->stage_at);
    memset(ds, 0, sizeof *ds);
}
