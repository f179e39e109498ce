// Trial lists and utterance ids: what is accepted, and the sentence for each kind of bad list.
#include "io/dataset/utt_ids.h"
#include "io/scores/trials.h"
#include "tests/test_util.h"

#include <string.h>

static char *ids[] = {"a", "b", "c", "d"};

// Parses text; returns the code and leaves the message in err.
static int parse(const char *text, size_t len, trials_t *t, char *err, size_t cap) {
    utt_index_t ix;
    if (utt_index_build(&ix, ids, 4, "ids", err, cap)) return -1;
    FILE *f = fmemopen((void *)text, len, "r");
    err[0] = 0;
    int rc = trials_parse(f, "t.txt", &ix, "the embeddings", t, err, cap);
    fclose(f);
    utt_index_free(&ix);
    return rc;
}

static void expect_bad(const char *text, size_t len, const char *want) {
    trials_t t;
    char err[512];
    int rc = parse(text, len, &t, err, sizeof err);
    EXPECT(rc == 3 && strstr(err, want), "'%s': rc %d, '%s' does not say '%s'", text, rc, err, want);
}

int main(void) {
    trials_t t;
    char err[512];
    const char *good = "a b target\r\n\n  c\td nontarget\nd a nontarget";
    EXPECT(parse(good, strlen(good), &t, err, sizeof err) == 0 && t.n == 3 && t.a[1] == 2 && t.b[1] == 3 &&
               t.target[0] == 1 && t.target[2] == 0,
           "good list: %s", err);
    trials_free(&t);

    // VoxCeleb's official format: the label first, 1 or 0.
    const char *vox = "1 a b\n0 c d\n\n0 d a\n";
    EXPECT(parse(vox, strlen(vox), &t, err, sizeof err) == 0 && t.n == 3 && t.a[0] == 0 && t.b[0] == 1 &&
               t.target[0] == 1 && t.a[2] == 3 && t.b[2] == 0 && t.target[1] == 0 && t.target[2] == 0,
           "VoxCeleb list: %s", err);
    trials_free(&t);
    expect_bad("1 a b\nc d nontarget\n", 20,
               "t.txt:2: a line in 'utt1 utt2 target|nontarget' format after line 1 in VoxCeleb's");
    expect_bad("a b target\n0 c d\n", 17, "t.txt:2: a line in VoxCeleb's '1|0 utt1 utt2' format after line 1");
    expect_bad("2 a b\n", 6, "t.txt:1: label 'b' must be 'target' or 'nontarget' (or the line VoxCeleb's");
    expect_bad("1 a zz\n0 a b\n", 14, "t.txt:1: utterance 'zz' is not in the embeddings");
    expect_bad("1 a a\n0 a b\n", 13, "t.txt:1: utterance 'a' is tried against itself");
    expect_bad("1 a b\n1 c d\n", 12, "all 2 trials are target");
    expect_bad("1 a b\n0 b c\n0 b a\n", 18, "t.txt:3: the pair of line 1 again");

    expect_bad("", 0, "t.txt: no trials");
    expect_bad("a b target\nc\n", 13,
               "t.txt:2: expected 'utt1 utt2 target|nontarget' or '1|0 utt1 utt2' (VoxCeleb), got fewer words");
    expect_bad("a b target extra\n", 17,
               "t.txt:1: expected 'utt1 utt2 target|nontarget' or '1|0 utt1 utt2' (VoxCeleb), got more words");
    expect_bad("a b tgt\n", 8, "t.txt:1: label 'tgt' must be 'target' or 'nontarget'");
    expect_bad("a zz target\n", 12, "t.txt:1: utterance 'zz' is not in the embeddings");
    expect_bad("a a target\nb c nontarget\n", 25, "t.txt:1: utterance 'a' is tried against itself");
    expect_bad("a b target\nc d target\n", 22, "all 2 trials are target; EER and minDCF need both");
    expect_bad("a b nontarget\n", 14, "all 1 trials are nontarget");
    expect_bad("a b target\nc d nontarget\nb a nontarget\n", 39, "t.txt:3: the pair of line 1 again");
    expect_bad("a b target\nc d non\0target\n", 26, "t.txt:2: holds a NUL byte");
    // An id longer than any fixed buffer is one word, not two.
    char longline[1200];
    memset(longline, 'x', 1000);
    snprintf(longline + 1000, sizeof longline - 1000, " b target\n");
    expect_bad(longline, strlen(longline), "t.txt:1: utterance 'xxxx");

    utt_index_t ix;
    char *dup[] = {"a", "b", "a"}, *space[] = {"a", "b c"}, *empty[] = {"a", ""};
    EXPECT(utt_index_build(&ix, dup, 3, "ids", err, sizeof err) == 3 &&
               strstr(err, "ids names utterance 'a' twice (entries 0 and 2)"),
           "%s", err);
    EXPECT(utt_index_build(&ix, space, 2, "ids", err, sizeof err) == 3 &&
               strstr(err, "ids[1] = \"b c\" is not a single word"),
           "%s", err);
    EXPECT(utt_index_build(&ix, empty, 2, "ids", err, sizeof err) == 3 && strstr(err, "ids[1]"), "%s", err);
    EXPECT(utt_index_build(&ix, ids, 4, "ids", err, sizeof err) == 0 && utt_index_find(&ix, "c") == 2 &&
               utt_index_find(&ix, "e") == -1 && utt_index_find(&ix, "") == -1,
           "lookup");
    utt_index_free(&ix);
    return test_report("test_trials");
}
