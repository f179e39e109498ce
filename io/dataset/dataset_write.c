#include "io/dataset/dataset_write.h"

#include "io/common/h5util.h"
#include "io/dataset/dataset.h"
#include "kernels/base/check.h"
#include "kernels/base/mpi_wait.h"
#include "kernels/base/spk_assert.h"
#include "kernels/base/stop_signals.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

// Chunks of about 256 KiB along the rows: a rank reading random crops drags in little it
// does not need, and the chunk index stays small (docs/dataset-format.md has the measurements).
#define CHUNK_BYTES (256 * 1024)

// A chunked dataset of `type`: (N, T, F) when fixed_frames > 0, else (rows, F), or (rows,)
// when dim is 0. Space is allocated at creation (as parallel HDF5 requires) and never
// filled: every row is written once, so a fill would only double the I/O.
static hid_t create_rows(hid_t loc, const char *name, const char *path, hid_t type, int64_t num_utts,
                         int64_t fixed_frames, int64_t rows, int64_t dim, int64_t chunk_bytes, int deflate) {
    hsize_t dims[3], chunk[3];
    int rank;
    const hsize_t target = (hsize_t)(chunk_bytes > 0 ? chunk_bytes : CHUNK_BYTES);
    const hsize_t row_bytes = (hsize_t)(dim > 0 ? dim : 1) * H5Tget_size(type);
    if (fixed_frames > 0) {
        rank = 3;
        dims[0] = (hsize_t)num_utts;
        dims[1] = (hsize_t)fixed_frames;
        dims[2] = (hsize_t)dim;
        hsize_t utt_bytes = (hsize_t)fixed_frames * row_bytes;
        chunk[0] = utt_bytes >= target ? 1 : target / utt_bytes;
        chunk[1] = dims[1];
        chunk[2] = dims[2];
    } else {
        rank = dim > 0 ? 2 : 1;
        dims[0] = (hsize_t)rows;
        dims[1] = (hsize_t)dim;
        chunk[0] = row_bytes >= target ? 1 : target / row_bytes;
        chunk[1] = dims[1];
    }
    if (chunk[0] > dims[0]) chunk[0] = dims[0];
    if (chunk[0] < 1) chunk[0] = 1;
    hid_t space = h5Check(H5Screate_simple(rank, dims, NULL), "%s: cannot create dataspace", path);
    hid_t dcpl = h5Check(H5Pcreate(H5P_DATASET_CREATE), "%s: cannot create properties", path);
    h5Check(H5Pset_chunk(dcpl, rank, chunk), "%s: cannot set chunking", path);
    h5Check(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), "%s: cannot turn off fill values", path);
    if (deflate > 0) h5Check(H5Pset_deflate(dcpl, (unsigned)deflate), "%s: cannot set compression", path);
    hid_t d = h5Check(H5Dcreate2(loc, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), "%s: cannot create '%s'",
                      path, name);
    H5Pclose(dcpl);
    H5Sclose(space);
    return d;
}

static int64_t *offsets_of(int64_t n, int64_t fixed, const int64_t *lengths) {
    int64_t *off = mallocCheck((size_t)(n + 1) * sizeof(int64_t));
    off[0] = 0;
    for (int64_t i = 0; i < n; i++) off[i + 1] = off[i] + (fixed > 0 ? fixed : lengths[i]);
    return off;
}

// ---- failures ---------------------------------------------------------------------------

// spk_die's cleanup while the writer exists: the temp file must not stay behind. HDF5 is
// left alone (a file whose close failed cannot be closed again; spk_die skips the library's
// shutdown).
static void remove_temp(void *ctx) { unlink(((const dataset_writer_t *)ctx)->tmp_path); }

static void close_objects(dataset_writer_t *w) {
    if (w->vfeatures > 0) H5Dclose(w->vfeatures);
    if (w->jpeg > 0) H5Dclose(w->jpeg);
    w->jpeg = 0;
    if (w->dxpl > 0) H5Pclose(w->dxpl);
    if (w->rows > 0) H5Dclose(w->rows);
    w->vfeatures = w->dxpl = w->rows = 0;
}

static void release(dataset_writer_t *w) {
    spk_on_die(NULL, NULL);
    stop_signals_disown_temp(w->tmp_path);
    free(w->offsets);
    free(w->voffsets);
    free(w->joffsets);
    memset(w, 0, sizeof *w);
}

void dataset_writer_abandon(dataset_writer_t *w) {
    close_objects(w);
    h5Check(H5Fclose(w->file), "%s: cannot close the dataset file", w->tmp_path);
    mpiCheck(MPI_Barrier(w->comm));  // nobody still writes into it
    if (w->rank == 0) unlink(w->tmp_path);
    release(w);
}

// A write failed on this rank (a full disk, a quota, an I/O error): the others may be stuck
// inside the same collective HDF5 call, so only ending the job frees them. Ranks other than
// 0 give rank 0 a second to report the same failure first, so the job ends with one line.
_Noreturn static void write_failed(const dataset_writer_t *w, const char *doing) {
    char why[256];
    h5_error_reason(why, sizeof why);  // before any other HDF5 call replaces the error stack
    if (w->rank != 0) nanosleep(&(struct timespec){1, 0}, NULL);
    spk_die(SPK_EXIT_FAILURE, "%s: cannot %s (%s); the partial file %s is removed", w->path, doing, why, w->tmp_path);
}

// ---- writing ----------------------------------------------------------------------------

static double mib(double bytes) { return bytes / 1048576.0; }

// A file system too small for the whole file is refused before anything is written: a full
// disk met inside a collective HDF5 call can leave the ranks out of step in HDF5's own
// collectives (one flushing, another closing), and nothing but the scheduler ends that job.
// Compressed rows take less than their raw size: then the space is not known in advance.
static void check_space(const dataset_writer_t *w, int64_t elem_bytes) {
    if (w->lay.deflate > 0) return;
    char dir[sizeof w->path];
    snprintf(dir, sizeof dir, "%s", w->path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = 0;
    else
        snprintf(dir, sizeof dir, ".");
    const double need = (double)w->offsets[w->lay.num_utts] * (double)w->row_width * (double)elem_bytes +
                        64.0 * (double)w->lay.num_utts + 65536.0;  // rows, then ids, labels, offsets, headers
    double have = -1;
    struct statvfs fs;
    if (w->rank == 0 && statvfs(dir, &fs) == 0) have = (double)fs.f_bavail * (double)fs.f_frsize;
    SPK_COLLECTIVE("the broadcast of the free disk space", MPI_Ibcast, &have, 1, MPI_DOUBLE, 0, w->comm);
    if (have < 0 || need <= have) return;
    int comm_size, world;
    mpiCheck(MPI_Comm_size(w->comm, &comm_size));
    mpiCheck(MPI_Comm_size(MPI_COMM_WORLD, &world));
    if (comm_size == world)
        spk_fail_all(
            SPK_EXIT_FAILURE,
            "%s: cannot write the dataset (No space left on device): it needs about %.1f MiB, %s has %.1f MiB free",
            w->path, mib(need), dir, mib(have));
    spk_die(SPK_EXIT_FAILURE,
            "%s: cannot write the dataset (No space left on device): it needs about %.1f MiB, %s has %.1f MiB free",
            w->path, mib(need), dir, mib(have));
}

void dataset_writer_create(dataset_writer_t *w, const char *path, MPI_Comm comm, const dataset_layout_t *lay) {
    memset(w, 0, sizeof *w);
    snprintf(w->path, sizeof w->path, "%s", path);
    snprintf(w->tmp_path, sizeof w->tmp_path, "%s.tmp", path);
    w->comm = comm;
    mpiCheck(MPI_Comm_rank(comm, &w->rank));
    w->lay = *lay;
    w->lay.lengths = NULL;
    const int audio = lay->sample_rate > 0;
    SPK_ASSERT(!(audio && lay->fixed_frames > 0));
    w->offsets = offsets_of(lay->num_utts, lay->fixed_frames, lay->lengths);
    w->row_width = audio ? 1 : lay->feature_dim;
    w->mem_type = audio ? H5T_NATIVE_INT16 : H5T_NATIVE_FLOAT;
    check_space(w, audio ? 2 : 4);

    h5_quiet();
    hid_t fapl = h5Check(H5Pcreate(H5P_FILE_ACCESS), "%s: cannot create file access properties", w->tmp_path);
    h5Check(H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL), "%s: cannot select the MPI-IO driver", w->tmp_path);
    stop_signals_own_temp(w->tmp_path);  // a stop signal removes it (every rank may)
    w->file = H5Fcreate(w->tmp_path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    spk_on_die(remove_temp, w);
    if (w->file < 0) write_failed(w, "create the dataset file");
    H5Pclose(fapl);
    w->rows = audio ? create_rows(w->file, "audio", path, H5T_STD_I16LE, lay->num_utts, 0, w->offsets[lay->num_utts], 0,
                                  lay->chunk_bytes, lay->deflate)
                    : create_rows(w->file, "features", path, H5T_IEEE_F32LE, lay->num_utts, lay->fixed_frames,
                                  w->offsets[lay->num_utts], lay->feature_dim, lay->chunk_bytes, lay->deflate);
    w->dxpl = h5Check(H5Pcreate(H5P_DATASET_XFER), "%s: cannot create transfer properties", path);
    h5Check(H5Pset_dxpl_mpio(w->dxpl, H5FD_MPIO_COLLECTIVE), "%s: cannot request collective I/O", path);
    // The headers and chunk index on disk now (chunks are allocated at creation), so the
    // collective close at the end has no metadata left to write and cannot fail half-way.
    if (H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0) write_failed(w, "create the dataset file");
}

// Rows [row0, row0 + rows) of a (rows, width) or (N, T, F) dataset; an empty selection
// when rows is 0 (the call stays collective).
static void write_rows(dataset_writer_t *w, hid_t d, hid_t mem_type, int64_t row0, int64_t rows, int64_t width,
                       int fixed_frames, const void *data) {
    hid_t fspace = h5Check(H5Dget_space(d), "%s: cannot get a dataspace", w->path);
    hsize_t m = (hsize_t)(rows > 0 ? rows * width : 1);
    hid_t mspace = h5Check(H5Screate_simple(1, &m, NULL), "%s: cannot create a memory space", w->path);
    if (rows == 0) {
        h5Check(H5Sselect_none(fspace), "%s: cannot select nothing", w->path);
        h5Check(H5Sselect_none(mspace), "%s: cannot select nothing", w->path);
    } else if (fixed_frames > 0) {  // whole utterances of (N, T, F)
        SPK_ASSERT(row0 % fixed_frames == 0 && rows % fixed_frames == 0);
        hsize_t off[3] = {(hsize_t)(row0 / fixed_frames), 0, 0};
        hsize_t cnt[3] = {(hsize_t)(rows / fixed_frames), (hsize_t)fixed_frames, (hsize_t)width};
        h5Check(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, off, NULL, cnt, NULL), "%s: cannot select rows", w->path);
    } else {
        hsize_t off[2] = {(hsize_t)row0, 0}, cnt[2] = {(hsize_t)rows, (hsize_t)width};
        h5Check(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, off, NULL, cnt, NULL), "%s: cannot select rows", w->path);
    }
    if (H5Dwrite(d, mem_type, mspace, fspace, w->dxpl, data) < 0) {
        char doing[96];
        snprintf(doing, sizeof doing, "write rows %lld..%lld", (long long)row0, (long long)(row0 + rows));
        write_failed(w, doing);
    }
    H5Sclose(mspace);
    H5Sclose(fspace);
}

void dataset_writer_put_rows(dataset_writer_t *w, int64_t row0, int64_t rows, const void *data) {
    SPK_ASSERT(row0 >= 0 && rows >= 0 && row0 + rows <= w->offsets[w->lay.num_utts]);
    write_rows(w, w->rows, w->mem_type, row0, rows, w->row_width, (int)w->lay.fixed_frames, data);
}

void dataset_writer_put(dataset_writer_t *w, int64_t utt, const void *data) {
    dataset_writer_put_rows(w, w->offsets[utt], w->offsets[utt + 1] - w->offsets[utt], data);
}

// The /visual group with its attributes (every rank of the writer calls it).
static void create_visual_group(dataset_writer_t *w, int64_t dim, double frame_rate, double audio_rate,
                                int64_t image_size, int64_t image_channels) {
    dataset_writer_note_f64(w, "frame_rate", audio_rate);
    hid_t g = h5Check(H5Gcreate2(w->file, "visual", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                      "%s: cannot create '/visual'", w->path);
    h5_attr_write_i64(g, "feature_dim", dim, w->path);
    h5_attr_write_f64(g, "frame_rate", frame_rate, w->path);
    if (image_size) {
        h5_attr_write_str(g, "encoding", "jpeg", w->path);
        h5_attr_write_i64(g, "image_size", image_size, w->path);
        h5_attr_write_i64(g, "image_channels", image_channels, w->path);
    }
    H5Gclose(g);
}

void dataset_writer_add_visual(dataset_writer_t *w, int64_t visual_dim, double frame_rate, double audio_rate,
                               const int64_t *lengths) {
    w->visual_dim = visual_dim;
    w->voffsets = offsets_of(w->lay.num_utts, 0, lengths);
    create_visual_group(w, visual_dim, frame_rate, audio_rate, 0, 0);
    w->vfeatures = create_rows(w->file, "visual/features", w->path, H5T_IEEE_F32LE, w->lay.num_utts, 0,
                               w->voffsets[w->lay.num_utts], visual_dim, 0, 0);
}

void dataset_writer_put_visual_rows(dataset_writer_t *w, int64_t row0, int64_t rows, const float *frames) {
    SPK_ASSERT(row0 >= 0 && rows >= 0 && row0 + rows <= w->voffsets[w->lay.num_utts]);
    write_rows(w, w->vfeatures, H5T_NATIVE_FLOAT, row0, rows, w->visual_dim, 0, frames);
}

void dataset_writer_put_visual(dataset_writer_t *w, int64_t utt, const float *frames) {
    dataset_writer_put_visual_rows(w, w->voffsets[utt], w->voffsets[utt + 1] - w->voffsets[utt], frames);
}

void dataset_writer_add_pictures(dataset_writer_t *w, int64_t size, int64_t channels, double frame_rate,
                                 double audio_rate, const int64_t *frames, const int64_t *bytes) {
    w->visual_dim = size * size * channels;
    w->voffsets = offsets_of(w->lay.num_utts, 0, frames);
    w->joffsets = offsets_of(w->lay.num_utts, 0, bytes);
    create_visual_group(w, w->visual_dim, frame_rate, audio_rate, size, channels);
    w->jpeg = create_rows(w->file, "visual/jpeg", w->path, H5T_STD_U8LE, w->lay.num_utts, 0,
                          w->joffsets[w->lay.num_utts], 0, 0, 0);
    if (H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0) write_failed(w, "create '/visual/jpeg'");
}

void dataset_writer_put_jpeg(dataset_writer_t *w, int64_t byte0, int64_t n, const void *data) {
    SPK_ASSERT(byte0 >= 0 && n >= 0 && byte0 + n <= w->joffsets[w->lay.num_utts]);
    write_rows(w, w->jpeg, H5T_NATIVE_UINT8, byte0, n, 1, 0, data);
}

static dataset_attr_t *new_attr(dataset_writer_t *w, const char *name, char kind) {
    SPK_ASSERT(w->num_attrs < DATASET_WRITER_ATTRS);
    dataset_attr_t *a = &w->attrs[w->num_attrs++];
    snprintf(a->name, sizeof a->name, "%s", name);
    a->kind = kind;
    return a;
}

void dataset_writer_note_str(dataset_writer_t *w, const char *name, const char *value) {
    snprintf(new_attr(w, name, 's')->str, sizeof w->attrs[0].str, "%s", value);
}
void dataset_writer_note_i64(dataset_writer_t *w, const char *name, int64_t value) {
    new_attr(w, name, 'i')->i64 = value;
}
void dataset_writer_note_f64(dataset_writer_t *w, const char *name, double value) {
    new_attr(w, name, 'f')->f64 = value;
}

// Rank 0, on the file reopened serially: the contract's attributes and metadata arrays.
static void write_metadata(const dataset_writer_t *w, hid_t f, const int32_t *labels, const char *const *utt_ids,
                           const char *const *speakers) {
    const char *what = w->tmp_path;
    const dataset_layout_t *l = &w->lay;
    h5_attr_write_str(f, "spkddp_format", l->sample_rate > 0 ? DATASET_FORMAT_AUDIO : DATASET_FORMAT, what);
    h5_attr_write_i64(f, "version", DATASET_VERSION, what);
    h5_attr_write_i64(f, "feature_dim", l->feature_dim, what);
    h5_attr_write_i64(f, "num_speakers", l->num_speakers, what);
    if (l->sample_rate > 0) h5_attr_write_i64(f, "sample_rate", l->sample_rate, what);
    for (int i = 0; i < w->num_attrs; i++) {
        const dataset_attr_t *a = &w->attrs[i];
        if (a->kind == 's')
            h5_attr_write_str(f, a->name, a->str, what);
        else if (a->kind == 'i')
            h5_attr_write_i64(f, a->name, a->i64, what);
        else
            h5_attr_write_f64(f, a->name, a->f64, what);
    }
    hsize_t n = (hsize_t)l->num_utts, n1 = n + 1;
    h5_write_array(f, "labels", H5T_STD_I32LE, 1, &n, labels, what);
    if (l->fixed_frames == 0) h5_write_array(f, "offsets", H5T_STD_I64LE, 1, &n1, w->offsets, what);
    if (utt_ids) h5_write_strings(f, "utt_ids", utt_ids, l->num_utts, what);
    if (speakers) h5_write_strings(f, "speakers", speakers, l->num_speakers, what);
    if (w->visual_dim > 0) h5_write_array(f, "visual/offsets", H5T_STD_I64LE, 1, &n1, w->voffsets, what);
    if (w->joffsets) h5_write_array(f, "visual/jpeg_offsets", H5T_STD_I64LE, 1, &n1, w->joffsets, what);
}

void dataset_writer_finish(dataset_writer_t *w, const int32_t *labels, const char *const *utt_ids,
                           const char *const *speakers) {
    close_objects(w);
    if (H5Fclose(w->file) < 0) write_failed(w, "write the rows");  // collective: the last rows reach the disk
    // Rank 0 alone; a failure in the metadata helpers goes through spk_die, whose cleanup
    // (remove_temp) removes the file.
    if (w->rank == 0) {
        hid_t f = H5Fopen(w->tmp_path, H5F_ACC_RDWR, H5P_DEFAULT);
        if (f < 0) write_failed(w, "reopen the dataset file to finish it");
        write_metadata(w, f, labels, utt_ids, speakers);
        if (H5Fclose(f) < 0) write_failed(w, "write the metadata");
        if (rename(w->tmp_path, w->path) != 0)
            spk_die(SPK_EXIT_FAILURE, "%s: cannot rename into place (%s)", w->path, strerror(errno));
    }
    mpiCheck(MPI_Barrier(w->comm));  // nobody opens PATH before it is in place
    release(w);
}
