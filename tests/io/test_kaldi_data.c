// Kaldi lists (io/audio/kaldi_data.h): the optional lists may be given as NULL or "" (the header's
// promise; a NULL spk2id used to be dereferenced), and labels follow sorted speaker ids.
#include "io/audio/kaldi_data.h"
#include "tests/test_util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

int main(void) {
    char dir[] = "/tmp/spkddp_test_kaldi_XXXXXX", wav[64], u2s[64];
    if (!mkdtemp(dir)) return 1;
    snprintf(wav, sizeof wav, "%s/wav.scp", dir);
    snprintf(u2s, sizeof u2s, "%s/utt2spk", dir);
    put(wav, "a /x/a.wav\nb /x/b.wav\nc /x/c.wav\n");
    put(u2s, "a zed\nb amy\nc zed\n");
    const char *absent[2] = {NULL, ""};
    for (int k = 0; k < 2; k++) {
        kaldi_data_t d;
        kaldi_verdict_t v = {0};
        int rc = kaldi_data_read(&d, wav, absent[k], u2s, absent[k], &v);
        EXPECT(rc == 0, "optional lists as %s: %s", absent[k] ? "\"\"" : "NULL", v.msg);
        if (rc == 0) {
            EXPECT(d.n == 3 && d.num_speakers == 2, "%lld utterances, %lld speakers", (long long)d.n,
                   (long long)d.num_speakers);
            EXPECT(d.label[0] == 1 && d.label[1] == 0 && d.label[2] == 1, "labels %d %d %d", d.label[0], d.label[1],
                   d.label[2]);
            EXPECT(d.span[1].end < 0 && strcmp(d.span[1].source, "/x/b.wav") == 0, "span of b: %s", d.span[1].source);
        }
        kaldi_data_free(&d);
    }
    unlink(wav);
    unlink(u2s);
    rmdir(dir);
    return test_report("test_kaldi_data");
}
