// Verification trial lists: one trial per line, 'utt1 utt2 target|nontarget', ids separated by
// whitespace; blank lines are skipped.
#pragma once
#include "io/utt_ids.h"

#include <stdint.h>
#include <stdio.h>

typedef struct {
    int64_t n, cap;
    int64_t *a, *b;    // (n,) indices into the utterance list
    uint8_t *target;   // (n,) 1 = same speaker
} trials_t;

// Reads a trial list from f (called path in messages) against the utterances of ix. Refused,
// with one sentence naming path:line: a line that is not three words, a label other than
// target/nontarget, an id not in ix, an utterance tried against itself, a pair listed twice,
// a NUL byte; and a list without both kinds of trial (EER and minDCF need both). Returns 0,
// or SPK_EXIT_DATA with the sentence in err.
int trials_parse(FILE *f, const char *path, const utt_index_t *ix, trials_t *t, char *err, size_t cap);
void trials_free(trials_t *t);
