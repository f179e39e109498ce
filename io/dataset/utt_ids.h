// Utterance ids: the names trial lists use. An id is one word (no whitespace or control
// characters, since trial lists are split at whitespace) and names one utterance only.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int64_t n;
    const char **id;  // (n,) sorted; borrowed from the caller's strings
    int64_t *index;   // (n,) position of id[k] in the caller's list
} utt_index_t;

// Checks ids (n of them) and builds a lookup. 0, or SPK_EXIT_DATA with one sentence in err:
// "<where>[i] = "x" is not a single word" or "<where> names utterance 'x' twice".
int utt_index_build(utt_index_t *ix, char *const *ids, int64_t n, const char *where, char *err, size_t cap);
// Position of id in the caller's list, or -1.
int64_t utt_index_find(const utt_index_t *ix, const char *id);
void utt_index_free(utt_index_t *ix);
