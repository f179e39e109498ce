// safetensors files: what safetensors_write lays out (header length, 8-byte alignment, order,
// metadata) read back value for value, and each kind of malformed file refused with a message
// naming the file and what is wrong. Python's `safetensors` reads our files in
// tests/interop (speechbrain_check.py).
#include "io/export/safetensors.h"
#include "kernels/base/check.h"
#include "tests/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *PATH = "test_safetensors.tmp";

static void roundtrip(void) {
    const float w[6] = {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e-30f}, b[3] = {7, 8, 9};
    const int64_t steps = 123456789012345;
    st_tensor_t t[3] = {
        {.name = "layer.weight", .dtype = ST_F32, .ndim = 2, .shape = {2, 3}, .numel = 6, .data = w},
        {.name = "layer.bias", .dtype = ST_F32, .ndim = 1, .shape = {3}, .numel = 3, .data = b},
        {.name = "norm.num_batches_tracked", .dtype = ST_I64, .ndim = 0, .numel = 1, .data = &steps},
    };
    const st_meta_t meta[2] = {{"spkddp_model", "ecapa"}, {"note", "a \"quoted\"\nline"}};
    char err[512];
    EXPECT(safetensors_write(PATH, t, 3, meta, 2, err, sizeof err) == 0, "%s", err);
    EXPECT(safetensors_sniff(PATH), "not recognised as safetensors");
    FILE *f = fopen(PATH, "rb");
    uint64_t hl = 0;
    EXPECT(f && fread(&hl, 8, 1, f) == 1, "cannot read the header length");
    if (f) fclose(f);
    EXPECT(hl % 8 == 0, "header length %llu is not a multiple of 8", (unsigned long long)hl);

    safetensors_t st;
    EXPECT(safetensors_read(PATH, &st, err, sizeof err) == 0, "%s", err);
    EXPECT(st.count == 3, "%d tensors", st.count);
    const st_tensor_t *x = safetensors_find(&st, "layer.weight"),
                      *c = safetensors_find(&st, "norm.num_batches_tracked");
    EXPECT(x && x->dtype == ST_F32 && x->ndim == 2 && x->shape[0] == 2 && x->shape[1] == 3, "layer.weight header");
    EXPECT(x && memcmp(x->data, w, sizeof w) == 0, "layer.weight values");
    EXPECT(c && c->dtype == ST_I64 && c->ndim == 0 && c->numel == 1, "num_batches_tracked header");
    int64_t got = 0;
    if (c) memcpy(&got, c->data, sizeof got);
    EXPECT(got == steps, "num_batches_tracked %lld", (long long)got);
    // 8-byte tensors first, so every tensor is aligned to its element size in the file.
    EXPECT(c && c->data == st.image, "the int64 counter is not first in the data section");
    const char *m = safetensors_meta(&st, "note");
    EXPECT(m && strcmp(m, "a \"quoted\"\nline") == 0, "metadata read back as '%s'", m ? m : "(none)");
    EXPECT(safetensors_meta(&st, "absent") == NULL, "a missing key is found");
    safetensors_free(&st);
}

// A file of an 8-byte header length, the header and `data` zero bytes.
static void write_raw(const char *header, size_t data, int64_t claimed) {
    FILE *f = fopen(PATH, "wb");
    uint64_t hl = claimed >= 0 ? (uint64_t)claimed : strlen(header);
    fwrite(&hl, 8, 1, f);
    fwrite(header, 1, strlen(header), f);
    for (size_t i = 0; i < data; i++) fputc(0, f);
    fclose(f);
}

static void refused(const char *header, size_t data, int64_t claimed, const char *want) {
    write_raw(header, data, claimed);
    safetensors_t st;
    char err[512] = "";
    int rc = safetensors_read(PATH, &st, err, sizeof err);
    EXPECT(rc == SPK_EXIT_CKPT, "accepted (rc %d): %s", rc, header);
    EXPECT(strstr(err, want) && strstr(err, PATH), "for %s: message '%s' lacks '%s' or the path", header, err, want);
}

static void malformed(void) {
    const char *w = "\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}";
    char ok[256];
    snprintf(ok, sizeof ok, "{%s}", w);
    write_raw(ok, 8, -1);
    safetensors_t st;
    char err[512];
    EXPECT(safetensors_read(PATH, &st, err, sizeof err) == 0, "a valid unpadded file: %s", err);
    if (st.count == 1) safetensors_free(&st);
    refused(ok, 8, 4000, "header length (first 8 bytes) says 4000 bytes");  // header longer than the file
    refused("[1, 2]", 0, -1, "not a safetensors file");                     // no '{'
    refused("{\"w\": {\"dtype\": }", 0, -1, "not valid JSON");
    refused(ok, 4, -1, "holds 4 bytes, its tensors 8");    // truncated data
    refused(ok, 12, -1, "holds 12 bytes, its tensors 8");  // trailing bytes
    refused("{\"w\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [0, 4]}}", 4, -1, "dtype F16");
    refused("{\"w\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}}", 8, -1,
            "span 8 bytes, its shape and dtype need 12");
    refused("{\"w\": {\"dtype\": \"F32\", \"shape\": [-2], \"data_offsets\": [0, 8]}}", 8, -1, "'shape' must be");
    refused("{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 0]}}", 8, -1, "'data_offsets' must be");
    refused(
        "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
        " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}",
        8, -1, "no gap or overlap");
    refused("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8, -1, "no gap or overlap");
    refused("{\"a\": {\"dtype\": \"F32\", \"shape\": [1]}}", 0, -1, "needs 'dtype'");
    refused("{\"__metadata__\": {\"k\": 3}}", 0, -1, "'__metadata__' entry 'k' is not a string");
    refused(
        "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
        " \"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}",
        8, -1, "not valid JSON");                       // duplicate
    refused("{}", 0, 1 << 30, "the limit is 100 MiB");  // a header length past any sane limit
    remove("missing.safetensors");
    EXPECT(safetensors_read("missing.safetensors", &st, err, sizeof err) == SPK_EXIT_CKPT && strstr(err, "cannot read"),
           "a missing file: '%s'", err);
}

int main(void) {
    roundtrip();
    malformed();
    remove(PATH);
    return test_report("test_safetensors");
}
