// libFuzzer target: a Kaldi data directory's lists (io/audio/kaldi_data.h). The input is split at
// its bytes 0xFF into wav.scp, utt2spk, spk2id and segments (the last two when not empty), written
// as files into a private folder, then read and cross-checked. Accepted lists must keep the
// header's promises; refusals are one sentence naming a list.
#include "io/audio/kaldi_data.h"
#include "tests/fuzz/fuzz_build.h"

#include <stdio.h>
#include <unistd.h>

static char dir[256], path[4][300];
static const char *names[4] = {"wav.scp", "utt2spk", "spk2id", "segments"};

static void put(int k, const uint8_t *p, size_t n) {
    FILE *f = fopen(path[k], "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) {
        const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(dir, sizeof dir, "%s/spkddp_fuzz_kaldi_XXXXXX", tmp);
        if (!mkdtemp(dir)) abort();
        for (int k = 0; k < 4; k++) snprintf(path[k], sizeof path[k], "%s/%s", dir, names[k]);
    }
    const uint8_t *part = data, *end = data + size;
    size_t len[4] = {0};
    int parts = 0;
    while (parts < 4) {
        const uint8_t *cut = memchr(part, 0xFF, (size_t)(end - part));
        len[parts] = (size_t)((cut ? cut : end) - part);
        put(parts, part, len[parts]);
        parts++;
        if (!cut) break;
        part = cut + 1;
    }
    kaldi_data_t d;
    kaldi_verdict_t v = {0};
    // Absent lists as "" (as cmd_prepare passes them) or NULL, both of which the header allows.
    const char *absent = size & 1 ? NULL : "";
    const char *spk2id = parts > 2 && len[2] ? path[2] : absent, *segments = parts > 3 && len[3] ? path[3] : absent;
    if (kaldi_data_read(&d, path[0], segments, path[1], spk2id, &v) == 0) {
        FZ_REQUIRE(d.n >= 1 && d.num_speakers >= 1);
        for (int64_t i = 0; i < d.n; i++) {
            FZ_REQUIRE(d.label[i] >= 0 && d.label[i] < d.num_speakers && d.utt[i][0] && d.span[i].source[0]);
            FZ_REQUIRE(d.span[i].end < 0 || d.span[i].end > d.span[i].start);
        }
    } else {
        FZ_REQUIRE(v.code != 0 && strncmp(v.msg, dir, strlen(dir)) == 0 && !strchr(v.msg, '\n'));
    }
    kaldi_data_free(&d);  // what was read before a refusal, too
    return 0;
}
