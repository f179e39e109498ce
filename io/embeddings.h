// Embedding files: what `spkddp embed` writes and `spkddp score` reads.
//   root attributes: spkddp_format = "embeddings", version = 1, emb_dim, model
//   /embeddings float32 (N, E)   in utterance order of the source dataset
//   /utt_ids    strings (N)
//   /labels     int32 (N)        speaker indices of the source dataset
#pragma once
#include <stddef.h>
#include <stdint.h>

#define EMB_FORMAT "embeddings"
#define EMB_VERSION 1

typedef struct {
    int64_t n, dim;
    float *emb;      // (n, dim)
    char **utt_ids;  // (n,)
    int32_t *labels; // (n,)
} embeddings_t;

// Serial (rank 0), written as PATH.tmp and renamed.
void embeddings_write(const char *path, const embeddings_t *e, const char *model);
// Returns 0, or an spk_exit code with a message naming the file and field in err.
int embeddings_read(const char *path, embeddings_t *e, char *err, size_t errcap);
void embeddings_free(embeddings_t *e);
