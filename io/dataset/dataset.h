// Feature and audio datasets (HDF5, contract in docs/dataset-format.md), read in parallel
// through MPI-IO: every rank opens the file collectively and reads only the frames (or
// samples) it was given. An audio dataset holds 16-bit waveforms; its frames are those of the
// Kaldi fbank computed from them (25 ms windows, 10 ms hop, snip edges), so samplers and
// crops see the same frame counts as in the fbank dataset prepared from the same audio.
#pragma once
#include <hdf5.h>
#include <mpi.h>
#include <stdint.h>

#define DATASET_FORMAT       "features"
#define DATASET_FORMAT_AUDIO "audio"
#define DATASET_VERSION      1
#define DATASET_AUDIO_RATE   100  // audio frames per second unless the root attribute frame_rate says otherwise
// Limits of the contract (docs/dataset-format.md): beyond them a classifier head or a frame
// no longer fits a training node, and such values come from damaged files, not data.
#define DATASET_MAX_DIM      65536               // feature_dim of either stream
#define DATASET_MAX_PICTURE  (1024 * 1024 * 3)   // feature_dim of a visual stream of pictures (S x S x C)
#define DATASET_MAX_SPEAKERS ((int64_t)1 << 24)  // num_speakers
#define DATASET_MAX_UTTS     (((int64_t)1 << 31) - 2)

// A run of frames of one utterance: frames [start, start+count) of utterance `utt`.
typedef struct {
    int64_t utt;
    int64_t start;
    int64_t count;
} segment_t;

// One stream of rows: the audio features, the /visual stream, or the /audio samples.
typedef struct {
    char name[32];     // "/features", "/visual/features" or "/audio", for messages
    hid_t features;    // (N, T, F) fixed, (rows, F) variable, or (rows,) samples
    int variable;      // 1 when (rows, F) or (rows,) with offsets
    int64_t dim;       // F, or 1 for samples
    int64_t *offsets;  // (N+1,) first row of each utterance (i*T when fixed)
    hid_t mem_type;    // H5T_NATIVE_FLOAT, or H5T_NATIVE_INT16 for samples
    int samples;       // 1 for the 1-D /audio stream
} stream_t;

typedef struct {
    char path[4096];
    hid_t file;
    hid_t dxpl;            // transfer property list: collective, or independent on an oversubscribed node
    int64_t num_utts;      // N
    int64_t num_speakers;  // labels are in [0, num_speakers)
    int32_t *labels;       // (N,)
    stream_t audio;        // /features (+ /offsets); for an audio dataset, the fbank frames
                           // its samples give (offsets only, no HDF5 dataset)
    stream_t wave;         // /audio (+ /offsets in samples) of an audio dataset; dim 0 otherwise
    int64_t sample_rate;   // audio dataset: samples per second (0 for a feature dataset)
    int64_t frame_length;  // audio dataset: fbank window and hop in samples (400, 160 at 16 kHz)
    int64_t frame_shift;
    double frame_length_ms, frame_shift_ms;  // the same in milliseconds (25, 10)
    stream_t visual;                         // /visual/features (+ /visual/offsets); dim 0 when absent
    int64_t visual_ratio;                    // audio frames per visual frame (frame rates' ratio, an integer)
    // A visual stream of pictures: visual has the frame offsets and dim = size * size * channels
    // (no HDF5 dataset); jpeg holds each utterance's frames as bytes (offsets in bytes), each
    // frame a 4-byte little-endian length and a JPEG picture.
    int64_t image_size, image_channels;  // 0 for a stream of feature vectors
    stream_t jpeg;                       // /visual/jpeg (+ /visual/jpeg_offsets); dim 0 otherwise
    int64_t feature_dim;                 // = audio.dim
    // Reused read buffers (no per-step allocation after warm-up).
    char *stage;  // (stage_cap,) bytes
    int64_t stage_cap;
    int64_t *order;     // (order_cap,) segment permutation sorted by file position
    int64_t *stage_at;  // (order_cap,) where each segment starts in `stage`, in frames
    int64_t order_cap;
} dataset_t;

// Collective. Validates the contract (dataset_check on rank 0) and stops every rank with a
// one-line error naming the file and field when it does not hold.
void dataset_open(dataset_t *ds, const char *path, MPI_Comm comm);

// What dataset_check finds: the shapes, and the small arrays it read and checked.
typedef struct {
    int variable;  // [rows, F] with offsets, else [N, T, F]
    int64_t dim, rows, fixed_frames;
} dataset_shape_t;

typedef struct {
    int64_t num_utts, num_speakers, visual_ratio;
    int has_visual;
    dataset_shape_t audio, visual;
    int64_t sample_rate, frame_length, frame_shift;  // audio datasets (sample_rate 0: features)
    double frame_length_ms, frame_shift_ms;
    int32_t *labels;    // (num_utts,)
    int64_t *offsets;   // (num_utts + 1,) frames (an audio dataset's: the fbank frames of its samples)
    int64_t *voffsets;  // (num_utts + 1,) with the visual stream
    int64_t *woffsets;  // (num_utts + 1,) samples, in an audio dataset
    // A visual stream of pictures (JPEG frames, docs/dataset-format.md): its shape, and each
    // utterance's bytes in /visual/jpeg.
    int64_t image_size, image_channels, jpeg_bytes;
    int64_t *joffsets;  // (num_utts + 1,) with pictures
} dataset_header_t;

// The serial half of dataset_open (and what the fuzzer drives): checks the whole contract of
// docs/dataset-format.md on an open file -- attributes, shapes, types, stored sizes, offsets,
// labels, utterance ids -- and reads the small arrays. Returns 0 (free h with
// dataset_header_free), or SPK_EXIT_DATA with one sentence naming the file and field in err.
int dataset_check(hid_t f, const char *path, dataset_header_t *h, char *err, size_t cap);
void dataset_header_free(dataset_header_t *h);
// A hash of what decides a training trajectory besides the frames themselves: sizes,
// offsets and labels (checkpoints record it so a resume can tell the data changed).
uint64_t dataset_fingerprint(const dataset_t *ds);
static inline int64_t stream_frames(const stream_t *s, int64_t utt) { return s->offsets[utt + 1] - s->offsets[utt]; }
static inline int64_t dataset_frames(const dataset_t *ds, int64_t utt) { return stream_frames(&ds->audio, utt); }
// Audio dataset: the samples that frames [start, start + count) of an utterance are
// computed from (snip edges: frame t covers samples [t S, t S + L)).
static inline segment_t dataset_frames_to_samples(const dataset_t *ds, segment_t frames) {
    return (segment_t){frames.utt, frames.start * ds->frame_shift,
                       (frames.count - 1) * ds->frame_shift + ds->frame_length};
}
void dataset_close(dataset_t *ds);
