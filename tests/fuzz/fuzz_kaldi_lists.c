// libFuzzer target: Kaldi lists (io/kaldi_lists.h). The input is split at its bytes 0xFF into
// a wav.scp, an utt2spk and, when there is a third part, an spk2id; each is parsed, then
// they are joined. Accepted lists must keep the header's promises; refusals are one sentence.
#include "io/kaldi_lists.h"
#include "tests/fuzz/fuzz_build.h"

#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *part[3] = {(const char *)data, NULL, NULL};
    size_t len[3] = {size, 0, 0};
    int parts = 1;
    for (size_t i = 0; i < size && parts < 3; i++)
        if (data[i] == 0xFF) {
            len[parts - 1] = (size_t)((const char *)data + i - part[parts - 1]);
            part[parts] = (const char *)data + i + 1;
            len[parts] = size - i - 1;
            parts++;
        }
    kaldi_list_t wav = {0}, u2s = {0}, s2i = {0};  // a failed parse leaves its list empty
    char err[1024] = "";
    int rc = kaldi_list_parse(part[0], len[0], "wav.scp", "wav.scp", "UTTERANCE-ID PATH", KALDI_REST_OF_LINE, &wav, err, sizeof err);
    if (rc) {
        FZ_REQUIRE(strncmp(err, "wav.scp", 7) == 0);
        return 0;
    }
    for (int64_t i = 0; i < wav.n; i++) FZ_REQUIRE(wav.e[i].key[0] && wav.e[i].value[0] && wav.e[i].line >= 1);
    rc = kaldi_list_parse(part[1] ? part[1] : "", len[1], "utt2spk", "utt2spk", "UTTERANCE-ID SPEAKER-ID", KALDI_ONE_WORD, &u2s, err,
                          sizeof err);
    if (rc == 0 && parts == 3)
        rc = kaldi_list_parse(part[2], len[2], "spk2id", "spk2id", "SPEAKER-ID INDEX", KALDI_ONE_WORD, &s2i, err, sizeof err);
    if (rc == 0) {
        int32_t *labels = calloc((size_t)wav.n, sizeof *labels);
        int64_t speakers = 0;
        if (kaldi_lists_join(&wav, &u2s, parts == 3 ? &s2i : NULL, labels, &speakers, err, sizeof err) == 0)
            for (int64_t i = 0; i < wav.n; i++) FZ_REQUIRE(labels[i] >= 0 && labels[i] < speakers);
        else
            FZ_REQUIRE(strncmp(err, "wav.scp", 7) == 0 || strncmp(err, "utt2spk", 7) == 0 || strncmp(err, "spk2id", 6) == 0);
        free(labels);
    }
    kaldi_list_free(&wav);
    kaldi_list_free(&u2s);
    kaldi_list_free(&s2i);
    return 0;
}
