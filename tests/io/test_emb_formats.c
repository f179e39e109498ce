// npy and Kaldi ark embeddings, byte for byte: the npy header (magic, version 1.0, '<f4',
// shape, 64-byte alignment) and data, the id list; the ark records ("ID \0BFV \4" + int32 +
// floats) at the offsets the scp gives; ids with whitespace refused. numpy.load and
// kaldi_io read the same files in tests/interop (formats_check.py).
#include "io/scores/emb_formats.h"
#include "kernels/base/check.h"
#include "tests/test_util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = calloc(*n + 1, 1);
    if (fread(buf, 1, *n, f) != *n) *n = 0;
    fclose(f);
    return buf;
}

int main(void) {
    float emb[6] = {1, -2, 3.5f, 0.25f, -0.125f, 1e-8f};
    char *ids[2] = {"spk1-a", "spk2-b"};
    embeddings_t e = {.n = 2, .dim = 3, .emb = emb, .utt_ids = ids};
    char err[512];
    EXPECT(emb_write_npy("t.npy", "t_ids.txt", &e, err, sizeof err) == 0, "%s", err);
    size_t n;
    char *b = slurp("t.npy", &n);
    EXPECT(b && !memcmp(b, "\x93NUMPY\x01\x00", 8), "npy magic and version");
    uint16_t hl = 0;
    if (b) memcpy(&hl, b + 8, 2);
    EXPECT((10 + hl) % 64 == 0 && b[10 + hl - 1] == '\n', "header of %u bytes", hl);
    EXPECT(b && strstr(b + 10, "'descr': '<f4'") && strstr(b + 10, "'fortran_order': False") &&
               strstr(b + 10, "'shape': (2, 3)"),
           "header dict '%.*s'", hl, b ? b + 10 : "");
    EXPECT(n == 10u + hl + sizeof emb && !memcmp(b + 10 + hl, emb, sizeof emb), "npy data");
    free(b);
    b = slurp("t_ids.txt", &n);
    EXPECT(b && !strcmp(b, "spk1-a\nspk2-b\n"), "id list '%s'", b ? b : "");
    free(b);

    EXPECT(emb_write_ark("t.ark", "t.scp", &e, err, sizeof err) == 0, "%s", err);
    char *scp = slurp("t.scp", &n);
    EXPECT(scp && !strcmp(scp, "spk1-a t.ark:7\nspk2-b t.ark:36\n"), "scp '%s'", scp ? scp : "");
    free(scp);
    b = slurp("t.ark", &n);
    const size_t rec = 10 + sizeof emb / 2;  // "\0BFV \4" + int32 + 3 floats
    EXPECT(n == 7 + rec + 7 + rec, "ark of %zu bytes", n);
    EXPECT(b && !memcmp(b, "spk1-a \0BFV \4\3\0\0\0", 17) && !memcmp(b + 17, emb, 12), "first record");
    EXPECT(b && !memcmp(b + 7 + rec, "spk2-b \0BFV \4\3\0\0\0", 17) && !memcmp(b + 7 + rec + 17, emb + 3, 12),
           "second record");
    free(b);

    char *bad[2] = {"spk1-a", "two words"};
    e.utt_ids = bad;
    EXPECT(emb_write_ark("bad.ark", "bad.scp", &e, err, sizeof err) == SPK_EXIT_DATA && strstr(err, "'two words'"),
           "%s", err);
    FILE *f = fopen("bad.scp", "r");
    EXPECT(!f, "an scp was written for a refused archive");
    if (f) fclose(f);
    remove("t.npy");
    remove("t_ids.txt");
    remove("t.ark");
    remove("t.scp");
    return test_report("test_emb_formats");
}
