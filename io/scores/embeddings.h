// Embedding files: what `spkddp embed` writes and `spkddp score` and `spkddp trials` read.
//   root attributes: spkddp_format = "embeddings", version = 1, emb_dim, model
//   /embeddings float32 (N, E)   in utterance order of the source dataset, finite
//   /utt_ids    strings (N)      single words, each once
//   /labels     int32 (N)        speaker indices of the source dataset (optional)
#pragma once
#include <stddef.h>
#include <stdint.h>

#define EMB_FORMAT  "embeddings"
#define EMB_VERSION 1

typedef struct {
    int64_t n, dim;
    float *emb;       // (n, dim)
    char **utt_ids;   // (n,)
    int32_t *labels;  // (n,) zeros when the file has none
    int has_labels;
} embeddings_t;

// Serial (rank 0): built in memory and written atomically (io/common/atomic_file.h), replacing an
// existing file; a failure ends the job with one line and leaves the target as it was.
void embeddings_write(const char *path, const embeddings_t *e, const char *model);
// Checks the whole file (format, version, shapes, stored sizes, finite values, ids) and reads
// it. Returns 0, or an spk_exit code with a message naming the file and field in err.
int embeddings_read(const char *path, embeddings_t *e, char *err, size_t errcap);
void embeddings_free(embeddings_t *e);
