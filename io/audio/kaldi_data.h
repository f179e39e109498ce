// A Kaldi data directory's lists, read and checked on one rank: wav.scp (recordings: a path,
// or a command whose stdout is a WAV stream, `cmd |`), optional segments (utterances as
// spans of recordings), utt2spk and optional spk2id. Any problem is one sentence naming the
// file and line (docs/features.md).
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int code;  // 0, or the exit code (SPK_EXIT_DATA for a bad list)
    char msg[1536];
} kaldi_verdict_t;

// One "KEY VALUE" line of a list file.
typedef struct {
    char *key, *value;
    int64_t line;   // 1-based
    int64_t index;  // position among the entries of its file
} kaldi_entry_t;

typedef struct {
    const char *path;
    kaldi_entry_t *e;
    int64_t n;
    char *text;  // owns the strings
} kaldi_list_t;

// Where an utterance's samples come from.
typedef struct {
    const char *source;  // wav.scp value: a path, or a command ending in '|'
    double start, end;   // seconds within the recording; end < 0: to its end (no segments: 0, -1)
    int64_t line;        // line of the utterance's entry (segments, or wav.scp without segments)
} kaldi_span_t;

typedef struct {
    int64_t n;           // utterances, in segments (or wav.scp) order
    char **utt;          // (n,) ids, into the lists' text
    kaldi_span_t *span;  // (n,)
    int32_t *label;      // (n,)
    int64_t num_speakers;
    char **speakers;        // (num_speakers,) names by label
    const char *listed_in;  // the file whose lines `span[i].line` count (segments or wav.scp)
    kaldi_list_t wav, seg, u2s, s2i;
} kaldi_data_t;

// Reads and cross-checks the lists (segments and spk2id may be NULL or ""). Returns 0, or -1
// with the verdict filled.
int kaldi_data_read(kaldi_data_t *d, const char *wav_scp, const char *segments, const char *utt2spk, const char *spk2id,
                    kaldi_verdict_t *v);
void kaldi_data_free(kaldi_data_t *d);
// One list on its own, "KEY VALUE" lines with VALUE one word (utt2dur, ...), checked as
// kaldi_data_read checks utt2spk (`what` and `form` name the list and its line in messages).
// Returns 0, or -1 with the verdict filled.
int kaldi_list_read(const char *path, const char *what, const char *form, kaldi_list_t *l, kaldi_verdict_t *v);
void kaldi_list_free(kaldi_list_t *l);
// A wav.scp value that is a command (`cmd |`): the command without the pipe, in buf.
// Returns NULL for a path.
const char *kaldi_pipe_command(const char *source, char *buf, size_t cap);
