// Kaldi data lists: wav.scp ("UTTERANCE-ID PATH", the path the rest of the line, so it may
// hold spaces), utt2spk ("UTTERANCE-ID SPEAKER-ID"), spk2id ("SPEAKER-ID INDEX"). The text is
// parsed from memory, so the parser can be fuzzed (tests/fuzz); a bad line gives one sentence
// naming the file and line.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *key, *value;  // into the list's own copy of the text
    int64_t line;       // 1-based
} kaldi_entry_t;

typedef struct {
    const char *path;   // for messages
    kaldi_entry_t *e;   // (n,) in file order
    int64_t n;
    char *text;
} kaldi_list_t;

typedef enum {
    KALDI_REST_OF_LINE,  // wav.scp: the value is the rest of the line, trimmed; no pipes
    KALDI_ONE_WORD,      // utt2spk, spk2id: the value is one word
} kaldi_value_t;

// Parses len bytes of text (copied). `what` and `form` name the list and its line for
// messages ("wav.scp", "UTTERANCE-ID PATH"). Refused: NUL bytes, empty lines, a line of one
// word, more words than the form has, a piped command ('... |'), a key named twice, an empty
// list. 0, or SPK_EXIT_DATA with the sentence in err.
int kaldi_list_parse(const char *text, size_t len, const char *path, const char *what, const char *form, kaldi_value_t kind,
                     kaldi_list_t *l, char *err, size_t cap);
// kaldi_list_parse of a file; a file that cannot be read is refused the same way.
int kaldi_list_read(const char *path, const char *what, const char *form, kaldi_value_t kind, kaldi_list_t *l, char *err,
                    size_t cap);
void kaldi_list_free(kaldi_list_t *l);

// Every utterance of wav (in its order) with its speaker's label: utt2spk must name exactly
// wav's utterances; labels are the speakers' positions in byte order of their names (Kaldi's
// C-locale sort), or their spk2id indices when spk2id is given (then every index is an
// integer in [0, speakers) used once). labels: (wav->n,); *num_speakers set. 0 or SPK_EXIT_DATA.
int kaldi_lists_join(const kaldi_list_t *wav, const kaldi_list_t *utt2spk, const kaldi_list_t *spk2id, int32_t *labels,
                     int64_t *num_speakers, char *err, size_t cap);
