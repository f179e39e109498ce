// Verification trial lists: one trial per line, ids separated by whitespace, in one of two
// formats (blank lines are skipped):
//   utt1 utt2 target|nontarget    Kaldi's and spkddp trials' format
//   1|0 utt1 utt2                 VoxCeleb's official lists (veri_test2.txt, list_test_hard2.txt):
//                                 1 for a target trial, 0 for a nontarget one
#pragma once
#include "io/dataset/utt_ids.h"

#include <stdint.h>
#include <stdio.h>

typedef struct {
    int64_t n, cap;
    int64_t *a, *b;   // (n,) indices into the utterance list
    uint8_t *target;  // (n,) 1 = same speaker
} trials_t;

// Reads a trial list from f (called path in messages) against the utterances of ix. Refused,
// with one sentence naming path:line: a line that is not three words, a label other than
// target/nontarget (or 1/0 first), lines of both formats in one list, an id not in ix, an
// utterance tried against itself, a pair listed twice, a NUL byte; and a list without both
// kinds of trial (EER and minDCF need both). Returns 0,
// or SPK_EXIT_DATA with the sentence in err. `ids_from` names where ix's ids came from, for the
// message of an unknown one ("the embeddings", "--val-data val.h5").
int trials_parse(FILE *f, const char *path, const utt_index_t *ix, const char *ids_from, trials_t *t, char *err,
                 size_t cap);
void trials_free(trials_t *t);
