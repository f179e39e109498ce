#include "io/scores/emb_formats.h"

#include "io/common/atomic_file.h"
#include "kernels/base/check.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "'<f4' and Kaldi's binary floats are little-endian");

static int check_ids(const embeddings_t *e, const char *path, char *err, size_t cap) {
    for (int64_t i = 0; i < e->n; i++) {
        const char *s = e->utt_ids[i];
        int ok = s[0] != 0;
        for (const char *c = s; ok && *c; c++) ok = !isspace((unsigned char)*c);
        if (!ok) {
            snprintf(err, cap, "%s: utterance id %lld ('%.100s') is empty or holds whitespace", path, (long long)i, s);
            return SPK_EXIT_DATA;
        }
    }
    return 0;
}

int emb_write_npy(const char *npy, const char *ids, const embeddings_t *e, char *err, size_t cap) {
    if (check_ids(e, ids, err, cap)) return SPK_EXIT_DATA;
    char dict[128];
    int dl = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%lld, %lld), }",
                      (long long)e->n, (long long)e->dim);
    // magic (6) + version (2) + header length (2) + dict, spaces and '\n': a multiple of 64
    const size_t header = (10 + (size_t)dl + 1 + 63) / 64 * 64, data = (size_t)(e->n * e->dim) * sizeof(float);
    unsigned char *buf = mallocCheck(header + data);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    const uint16_t hl = (uint16_t)(header - 10);
    memcpy(buf + 8, &hl, 2);
    memset(buf + 10, ' ', header - 10);
    memcpy(buf + 10, dict, (size_t)dl);
    buf[header - 1] = '\n';
    memcpy(buf + header, e->emb, data);
    int rc = atomic_write_file(npy, buf, header + data, ATOMIC_REPLACE, err, cap);
    free(buf);
    if (rc) return SPK_EXIT_FAILURE;
    atomic_text_t t;
    atomic_text_open(&t);
    for (int64_t i = 0; i < e->n; i++) fprintf(t.f, "%s\n", e->utt_ids[i]);
    return atomic_text_commit(&t, ids, err, cap) ? SPK_EXIT_FAILURE : 0;
}

int emb_write_ark(const char *ark, const char *scp, const embeddings_t *e, char *err, size_t cap) {
    if (check_ids(e, ark, err, cap)) return SPK_EXIT_DATA;
    size_t total = 0;
    for (int64_t i = 0; i < e->n; i++)
        total +=
            strlen(e->utt_ids[i]) + 1 + 10 + (size_t)e->dim * sizeof(float);  // "ID " + "\0BFV \4" + int32 + floats
    unsigned char *buf = mallocCheck(total + 1), *p = buf;
    const int32_t dim = (int32_t)e->dim;
    atomic_text_t t;
    atomic_text_open(&t);
    for (int64_t i = 0; i < e->n; i++) {
        const size_t kl = strlen(e->utt_ids[i]);
        memcpy(p, e->utt_ids[i], kl);
        p[kl] = ' ';
        p += kl + 1;
        fprintf(t.f, "%s %s:%zu\n", e->utt_ids[i], ark, (size_t)(p - buf));
        memcpy(p, "\0BFV \4", 6);  // binary marker, the token "FV ", the size of the int32 that follows
        memcpy(p + 6, &dim, 4);
        memcpy(p + 10, e->emb + i * e->dim, (size_t)e->dim * sizeof(float));
        p += 10 + (size_t)e->dim * sizeof(float);
    }
    int rc = atomic_write_file(ark, buf, (size_t)(p - buf), ATOMIC_REPLACE, err, cap);
    free(buf);
    if (rc) {  // no scp without its archive
        fclose(t.f);
        free(t.buf);
        return SPK_EXIT_FAILURE;
    }
    return atomic_text_commit(&t, scp, err, cap) ? SPK_EXIT_FAILURE : 0;
}
