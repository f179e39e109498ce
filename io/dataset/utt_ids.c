#include "io/dataset/utt_ids.h"

#include "kernels/base/check.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_word(const char *s) {
    if (!s || !*s) return 0;
    for (; *s; s++)
        if (isspace((unsigned char)*s) || iscntrl((unsigned char)*s)) return 0;
    return 1;
}

static const char **sort_ids;
static int cmp_pos(const void *a, const void *b) {
    int c = strcmp(sort_ids[*(const int64_t *)a], sort_ids[*(const int64_t *)b]);
    return c ? c : *(const int64_t *)a < *(const int64_t *)b ? -1 : 1;
}

int utt_index_build(utt_index_t *ix, char *const *ids, int64_t n, const char *where, char *err, size_t cap) {
    memset(ix, 0, sizeof *ix);
    for (int64_t i = 0; i < n; i++)
        if (!is_word(ids[i])) {
            snprintf(err, cap, "%s[%lld] = \"%.64s\" is not a single word (empty, or holds whitespace)", where,
                     (long long)i, ids[i] ? ids[i] : "");
            return SPK_EXIT_DATA;
        }
    ix->n = n;
    ix->index = mallocCheck((size_t)(n ? n : 1) * sizeof(int64_t));
    ix->id = mallocCheck((size_t)(n ? n : 1) * sizeof(char *));
    for (int64_t i = 0; i < n; i++) ix->index[i] = i;
    sort_ids = (const char **)ids;
    if (n > 0) qsort(ix->index, (size_t)n, sizeof(int64_t), cmp_pos);
    for (int64_t k = 0; k < n; k++) ix->id[k] = ids[ix->index[k]];
    for (int64_t k = 1; k < n; k++)
        if (strcmp(ix->id[k - 1], ix->id[k]) == 0) {
            snprintf(err, cap, "%s names utterance '%.200s' twice (entries %lld and %lld)", where, ix->id[k],
                     (long long)ix->index[k - 1], (long long)ix->index[k]);
            utt_index_free(ix);
            return SPK_EXIT_DATA;
        }
    return 0;
}

int64_t utt_index_find(const utt_index_t *ix, const char *id) {
    int64_t lo = 0, hi = ix->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(ix->id[mid], id);
        if (c == 0) return ix->index[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

void utt_index_free(utt_index_t *ix) {
    free(ix->id);
    free(ix->index);
    memset(ix, 0, sizeof *ix);
}
