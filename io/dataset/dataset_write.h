// The one writer of the dataset contract (docs/dataset-format.md), for `synth` (one rank,
// MPI_COMM_SELF) and `prepare` (all ranks, collective rounds). The file is created through
// MPI-IO as PATH.tmp; dataset_writer_finish adds the metadata on rank 0 (variable-length
// strings cannot be written through MPI-IO) and renames it into place, so a reader never
// sees a half-written dataset. A write that fails (a full disk, a quota) ends the job with
// one line naming the file and the reason, exit 1, and the temp file removed.
#pragma once
#include <hdf5.h>
#include <mpi.h>
#include <stdint.h>

// What the file holds. Every rank of the communicator passes the same layout.
typedef struct {
    int64_t num_utts;        // N
    int64_t num_speakers;    // labels lie in [0, num_speakers)
    int64_t feature_dim;     // F: frame dimension (audio store: mel bins computed when training)
    int64_t fixed_frames;    // T > 0: /features (N, T, F); 0: variable length with /offsets
    const int64_t *lengths;  // (N,) rows of each utterance (frames, or samples for audio); NULL when fixed
    int64_t sample_rate;     // > 0: an audio dataset, /audio int16 waveform samples at this rate
    int64_t chunk_bytes;     // chunk size along the rows; 0: the default (docs/dataset-format.md)
    int deflate;             // 1..9: gzip level of the chunks (0: none, the default)
} dataset_layout_t;

#define DATASET_WRITER_ATTRS 12  // provenance attributes a writer carries to the file

typedef struct {
    char name[32];
    char kind;  // 's', 'i' or 'f'
    char str[64];
    int64_t i64;
    double f64;
} dataset_attr_t;

typedef struct {
    char path[4096];
    char tmp_path[4200];
    MPI_Comm comm;
    int rank;
    hid_t file;
    hid_t rows;            // /features or /audio
    hid_t dxpl;            // collective transfers
    hid_t mem_type;        // float or int16
    dataset_layout_t lay;  // lengths not kept
    int64_t row_width;     // values per row: F, or 1 for audio
    int64_t *offsets;      // (N+1,) first row of each utterance
    hid_t vfeatures;       // /visual/features (rows, Fv), when a visual stream is added
    int64_t visual_dim;    // Fv, 0 without
    int64_t *voffsets;     // (N+1,)
    hid_t jpeg;            // /visual/jpeg, when the visual stream holds pictures
    int64_t *joffsets;     // (N+1,) bytes of each utterance's pictures
    dataset_attr_t attrs[DATASET_WRITER_ATTRS];
    int num_attrs;
} dataset_writer_t;

// Collective over comm: creates PATH.tmp and its row dataset (space allocated, never filled).
void dataset_writer_create(dataset_writer_t *w, const char *path, MPI_Comm comm, const dataset_layout_t *lay);
// Collective: every rank calls it, the same number of times, with its own rows
// [row0, row0 + rows) (rows may be 0): (rows, F) floats, or rows int16 samples for audio.
void dataset_writer_put_rows(dataset_writer_t *w, int64_t row0, int64_t rows, const void *data);
// One utterance's rows (its length as declared): a one-rank writer's convenience.
void dataset_writer_put(dataset_writer_t *w, int64_t utt, const void *data);
// A variable-length /visual stream at frame_rate (the audio's rate is audio_rate): lengths[i]
// visual frames for utterance i (one-rank writers).
void dataset_writer_add_visual(dataset_writer_t *w, int64_t visual_dim, double frame_rate, double audio_rate,
                               const int64_t *lengths);
void dataset_writer_put_visual(dataset_writer_t *w, int64_t utt, const float *frames);  // (len, Fv)
// Collective, as put_rows: rows [row0, row0 + rows) of /visual/features (rows may be 0).
void dataset_writer_put_visual_rows(dataset_writer_t *w, int64_t row0, int64_t rows, const float *frames);
// A visual stream of pictures (docs/dataset-format.md), collective (the same arguments on every
// rank): utterance i has frames[i] JPEG frames of size x size x channels in bytes[i] bytes, each
// frame a 4-byte little-endian length and the JPEG picture.
void dataset_writer_add_pictures(dataset_writer_t *w, int64_t size, int64_t channels, double frame_rate,
                                 double audio_rate, const int64_t *frames, const int64_t *bytes);
// Collective, as put_rows: bytes [byte0, byte0 + n) of /visual/jpeg (n may be 0).
void dataset_writer_put_jpeg(dataset_writer_t *w, int64_t byte0, int64_t n, const void *data);
// Provenance attributes of the root (not part of the contract), written by finish.
void dataset_writer_note_str(dataset_writer_t *w, const char *name, const char *value);
void dataset_writer_note_i64(dataset_writer_t *w, const char *name, int64_t value);
void dataset_writer_note_f64(dataset_writer_t *w, const char *name, double value);
// Collective. Labels (N,), optional utterance ids and speaker names (NULL to omit; needed on
// rank 0 only); closes and renames.
void dataset_writer_finish(dataset_writer_t *w, const int32_t *labels, const char *const *utt_ids,
                           const char *const *speakers);
// Collective: closes PATH.tmp and removes it, for a run that fails after creating the writer.
void dataset_writer_abandon(dataset_writer_t *w);
