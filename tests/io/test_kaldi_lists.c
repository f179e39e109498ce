// Kaldi lists: the accepted forms, each kind of bad line, and the join into labels.
#include "io/kaldi_lists.h"
#include "tests/test_util.h"

#include <string.h>

static int parse(const char *text, kaldi_value_t kind, kaldi_list_t *l, char *err) {
    return kaldi_list_parse(text, strlen(text), "L", "list", kind == KALDI_ONE_WORD ? "UTTERANCE-ID SPEAKER-ID" : "UTTERANCE-ID PATH",
                            kind, l, err, 512);
}

static void expect_bad(const char *text, kaldi_value_t kind, const char *want) {
    kaldi_list_t l;
    char err[512] = "";
    int rc = parse(text, kind, &l, err);
    EXPECT(rc == 3 && strstr(err, want), "'%s': rc %d, '%s' does not say '%s'", text, rc, err, want);
}

int main(void) {
    kaldi_list_t wav, u2s, s2i;
    char err[512] = "";
    EXPECT(parse("b /d/b 1.wav  \r\na\t/d/a.flac\n", KALDI_REST_OF_LINE, &wav, err) == 0 && wav.n == 2 &&
               strcmp(wav.e[0].value, "/d/b 1.wav") == 0 && strcmp(wav.e[1].key, "a") == 0 && wav.e[1].line == 2,
           "wav.scp: %s", err);
    EXPECT(parse("a s2\nb s1\n", KALDI_ONE_WORD, &u2s, err) == 0, "utt2spk: %s", err);
    int32_t labels[2];
    int64_t speakers = 0;
    EXPECT(kaldi_lists_join(&wav, &u2s, NULL, labels, &speakers, err, sizeof err) == 0 && speakers == 2 && labels[0] == 0 &&
               labels[1] == 1,
           "labels by sorted speaker name: %s", err);
    EXPECT(parse("s1 1\ns2 0\n", KALDI_ONE_WORD, &s2i, err) == 0, "spk2id: %s", err);
    EXPECT(kaldi_lists_join(&wav, &u2s, &s2i, labels, &speakers, err, sizeof err) == 0 && labels[0] == 1 && labels[1] == 0,
           "labels from spk2id: %s", err);
    kaldi_list_free(&s2i);
    EXPECT(parse("s1 0\ns2 0\n", KALDI_ONE_WORD, &s2i, err) == 0 &&
               kaldi_lists_join(&wav, &u2s, &s2i, labels, &speakers, err, sizeof err) == 3 &&
               strstr(err, "L:2: index 0 of speaker 's2' is already used on line 1"),
           "%s", err);
    kaldi_list_free(&s2i);
    kaldi_list_free(&u2s);
    EXPECT(parse("a s1\nc s1\n", KALDI_ONE_WORD, &u2s, err) == 0 &&
               kaldi_lists_join(&wav, &u2s, NULL, labels, &speakers, err, sizeof err) == 3 &&
               strstr(err, "L:1: utterance 'b' has no speaker in L"),
           "%s", err);
    kaldi_list_free(&u2s);
    kaldi_list_free(&wav);

    expect_bad("", KALDI_REST_OF_LINE, "L: the list is empty");
    expect_bad("a x\n\nb y\n", KALDI_REST_OF_LINE, "L:2: empty line");
    expect_bad("a\n", KALDI_REST_OF_LINE, "L:1: expected 'UTTERANCE-ID PATH', got only 'a'");
    expect_bad("a s1 s2\n", KALDI_ONE_WORD, "L:1: expected 'UTTERANCE-ID SPEAKER-ID', got more words after 'a'");
    expect_bad("a sox x.wav -t wav - |\n", KALDI_REST_OF_LINE, "L:1: utterance 'a': piped commands");
    expect_bad("a x\nb y\na z\n", KALDI_REST_OF_LINE, "L:3: duplicate UTTERANCE-ID 'a' (first on line 1)");
    kaldi_list_t l;
    EXPECT(kaldi_list_parse("a x\0b y\n", 8, "L", "list", "K V", KALDI_ONE_WORD, &l, err, sizeof err) == 3 && strstr(err, "NUL"), "%s", err);
    return test_report("test_kaldi_lists");
}
