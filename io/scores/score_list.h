// Score lists: the lines `spkddp score --out` writes, one trial per line,
//   utt1 utt2 score [score ...] [target|nontarget]
// (a cosine score, then the normalised one when a cohort was used). Either every line has a
// label or none has. One column of scores is taken: awk's field number (3 is the first
// score), or by default the last number of the line.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int64_t n;
    char **a, **b;    // (n,) utterance ids, into text
    double *score;    // (n,) the chosen column
    uint8_t *target;  // (n,) 1 target, 0 nontarget (all 0 when unlabelled)
    int labelled;     // the lines carry labels
    int field;        // the awk field read (of the first line, when chosen by default)
    char *text;       // owns the ids
} score_list_t;

// Reads path; field 0 picks the last number of each line. Returns 0, or SPK_EXIT_DATA with one
// sentence naming path:line in err: fewer than three words, a chosen field that is missing or
// not a finite number, labelled and unlabelled lines mixed, a NUL byte, no lines.
int score_list_read(const char *path, int field, score_list_t *l, char *err, size_t cap);
void score_list_free(score_list_t *l);
