// libFuzzer target: utterance ids and trial lists (io/dataset/utt_ids.h, io/scores/trials.h). The input is
// split at its first byte 0xFF: before it, utterance ids one a line; after it, a trial list.
// Accepted lists must keep io/scores/trials.h's promises; refusals are one sentence.
#include "io/dataset/utt_ids.h"
#include "io/scores/trials.h"
#include "tests/fuzz/fuzz_build.h"

#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *cut = memchr(data, 0xFF, size);
    size_t head = cut ? (size_t)(cut - data) : 0;
    char *ids_text = calloc(head + 1, 1);
    memcpy(ids_text, data, head);
    char *ids[64];
    int64_t n = 0;
    for (char *save = NULL, *tok = strtok_r(ids_text, "\n", &save); tok && n < 64; tok = strtok_r(NULL, "\n", &save))
        ids[n++] = tok;
    utt_index_t ix;
    char err[1024] = "";
    if (utt_index_build(&ix, ids, n, "ids", err, sizeof err) == 0) {
        for (int64_t i = 0; i < n; i++) FZ_REQUIRE(utt_index_find(&ix, ids[i]) == i);
        const char *list = cut ? (const char *)cut + 1 : (const char *)data;
        size_t len = cut ? size - head - 1 : size;
        FILE *f = fmemopen((void *)(len ? list : " "), len ? len : 1, "r");
        trials_t t;
        if (trials_parse(f, "t.txt", &ix, "the embeddings", &t, err, sizeof err) == 0) {
            int64_t targets = 0;
            for (int64_t i = 0; i < t.n; i++) {
                FZ_REQUIRE(t.a[i] >= 0 && t.a[i] < n && t.b[i] >= 0 && t.b[i] < n && t.a[i] != t.b[i] &&
                           t.target[i] <= 1);
                targets += t.target[i];
            }
            FZ_REQUIRE(t.n > 0 && targets > 0 && targets < t.n);
            trials_free(&t);
        } else {
            FZ_REQUIRE(strncmp(err, "t.txt", 5) == 0);
        }
        fclose(f);
        utt_index_free(&ix);
    } else {
        FZ_REQUIRE(strncmp(err, "ids", 3) == 0);
    }
    free(ids_text);
    return 0;
}
