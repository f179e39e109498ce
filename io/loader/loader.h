// Turns the sampler's sample indices into a batch of frames: whole utterances, or random
// crops of a fixed length. A crop's offset is drawn from (seed, epoch, sample index) only,
// never from the rank, so a sample gets the same crop on any world size. Utterances shorter
// than the crop (or than min_frames) are repeated to length. Optional per-sample mean
// normalisation (CMN). With the visual stream, the visual crop covers exactly the audio
// crop's time span (audio crops start and end on visual frame boundaries).
//
// From an audio dataset the loader reads the samples of each crop (docs/dataset-format.md:
// frames [s, s + T) need samples [160 s, 160 (s + T - 1) + 400) at 16 kHz) and computes their
// Kaldi fbank (io/audio/fbank.h) itself: bitwise the frames the fbank dataset of the same audio
// holds.
//
// Reading ahead: loader_prefetch reads a batch's crops (collective HDF5 reads, on the calling
// thread: parallel HDF5 is not thread-safe, and the reads take well under 1% of a step,
// docs/dataset-format.md) and hands each sample to worker threads, which turn crops into
// frames (fbank, repetition, CMN) while the caller computes. loader_wait returns the oldest
// batch in flight, helping the workers with what is left. Every sample is computed by one
// thread from its own crop, so results do not depend on the number of threads.
//
// Augmentation (io/augment/augment.h, loader_set_augment) happens there too: the draws and the bank
// reads beside the crops' read, the waveform and frame transforms on the workers.
#pragma once
#include "io/augment/augment.h"
#include "io/dataset/dataset.h"
#include "io/loader/batch.h"

#include <stdint.h>

#define LOADER_SLOTS 3  // batches a loader holds: one being used, the rest in flight

typedef struct loader_slot loader_slot_t;  // a batch and its crops (io/loader/loader.c)
typedef struct loader_pool loader_pool_t;  // worker threads and their scratch

typedef struct {
    dataset_t *ds;
    loader_spec_t spec;
    uint64_t seed;
    int max_batch;
    int threads;              // worker threads (0: the caller computes everything)
    loader_slot_t *slots;     // (LOADER_SLOTS,)
    int queue[LOADER_SLOTS];  // slots in flight, oldest first
    int queued;
    int in_use;  // slot of the batch last returned, -1: none
    loader_pool_t *pool;
    augment_t *aug;        // NULL: samples as stored
    int views;             // consecutive samples that are views of one utterance (loader_set_views)
    int local_from;        // views from this one on are local crops of local_crop frames (loader_set_local_crops)
    int64_t local_crop;    //
    int augment_pictures;  // a visual stream of pictures goes through picture augmentation
} loader_t;

// threads < 0: SPKDDP_LOADER_THREADS, else 1.
void loader_init(loader_t *l, dataset_t *ds, int max_batch, const loader_spec_t *spec, uint64_t seed, int threads);
// Augments every sample from now on (before the first loader_prefetch; NULL: none). The
// loader does not own `aug`. Labels become label + k num_speakers at speed factor k.
void loader_set_augment(loader_t *l, augment_t *aug);
// Pictures (a /visual stream of JPEG frames) are augmented from now on (before the first
// loader_prefetch): io/video/picture_augment.h, drawn per sample from (seed, epoch, view,
// utterance). No effect on other streams.
void loader_set_picture_augment(loader_t *l, int on);
// Views (contrastive self-supervision): from now on sample i of a batch is view i % views of
// its utterance, its crop and augmentation drawn with the view in the key (view 0's are the
// draws without views), so the views of one utterance differ and stay the same on any world
// size. The caller lists each utterance `views` times in a row.
void loader_set_views(loader_t *l, int views);
// Multi-crop (DINO): views from `from` on are cropped to `crop` frames instead of the spec's
// crop (before the first loader_prefetch; from >= views: none).
void loader_set_local_crops(loader_t *l, int from, int64_t crop);
// Collective (dataset_read): reads the crops of samples index[0..n) of `epoch` and queues
// them for the workers. The batch last returned by loader_wait stays valid until the next
// loader_prefetch or loader_wait.
void loader_prefetch(loader_t *l, int64_t epoch, const int64_t *index, int n);
// The oldest batch prefetched, once every sample of it is computed.
const batch_t *loader_wait(loader_t *l);
// Prefetch and wait: every rank calls it once per step.
const batch_t *loader_load(loader_t *l, int64_t epoch, const int64_t *index, int n);
void loader_free(loader_t *l);
