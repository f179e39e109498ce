// Embeddings in the files other toolkits read (`spkddp embed --format npy|ark`); the HDF5
// embeddings file is io/scores/embeddings.h.
//   npy: NumPy format 1.0, '<f4' (N, E) in C order, and beside it a text file of the
//        utterance ids, one a line, in row order (numpy.load + a list of lines).
//   ark: a Kaldi binary archive of float vectors, per utterance "ID \0BFV \4" + int32 E +
//        E floats, and its scp "ID ARK:OFFSET" (the offset of the "\0B" marker), as Kaldi's
//        copy-vector writes ark,scp:ARK,SCP and kaldi_io's read_vec_flt_scp/ark reads.
// Each file is written atomically, replacing what is there.
#pragma once
#include "io/scores/embeddings.h"

#include <stddef.h>

// 0, or an spk_exit code with one sentence naming the file in err: SPK_EXIT_FAILURE when a
// file cannot be written, SPK_EXIT_DATA for an utterance id that is empty or holds
// whitespace (neither a line list nor an archive key can carry it).
int emb_write_npy(const char *npy, const char *ids, const embeddings_t *e, char *err, size_t cap);
int emb_write_ark(const char *ark, const char *scp, const embeddings_t *e, char *err, size_t cap);
