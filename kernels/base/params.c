#include "kernels/base/params.h"

#include "kernels/base/check.h"
#include "kernels/base/spk_assert.h"

#include <stdlib.h>
#include <string.h>

int64_t param_table_add(param_table_t *p, const char *name, int ndim, const int64_t *shape) {
    SPK_ASSERT(ndim >= 1 && ndim <= PARAM_MAX_DIMS && strlen(name) < PARAM_NAME_MAX);
    if (p->count == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 16;
        param_tensor_t *t = realloc(p->t, (size_t)p->cap * sizeof *t);
        if (!t) spk_die(SPK_EXIT_FAILURE, "out of memory growing the parameter table");
        p->t = t;
    }
    param_tensor_t *t = &p->t[p->count++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->numel = 1;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->numel *= shape[i];
    }
    t->offset = p->total;
    p->total += t->numel;
    return t->offset;
}

void param_table_free(param_table_t *p) {
    free(p->t);
    memset(p, 0, sizeof *p);
}

static void shape_text(const param_tensor_t *x, char *out, size_t cap) {
    size_t n = (size_t)snprintf(out, cap, "(");
    for (int d = 0; d < x->ndim && n < cap; d++)
        n += (size_t)snprintf(out + n, cap - n, d ? ", %lld" : "%lld", (long long)x->shape[d]);
    if (n < cap) snprintf(out + n, cap - n, ")");
}

static int same_shape(const param_tensor_t *x, const param_tensor_t *y) {
    if (x->ndim != y->ndim) return 0;
    for (int d = 0; d < x->ndim; d++)
        if (x->shape[d] != y->shape[d]) return 0;
    return 1;
}

int param_table_difference(const param_table_t *a, const param_table_t *b, char *why, size_t cap) {
    char sa[96], sb[96], scratch[1];
    if (!why) why = scratch, cap = sizeof scratch;
    const int n = a->count < b->count ? a->count : b->count;
    for (int i = 0; i < n; i++) {
        const param_tensor_t *x = &a->t[i], *y = &b->t[i];
        if (strcmp(x->name, y->name) != 0) {
            snprintf(why, cap, "tensor %d is '%s' against '%s'", i, x->name, y->name);
            return 1;
        }
        if (!same_shape(x, y) || x->offset != y->offset) {
            shape_text(x, sa, sizeof sa), shape_text(y, sb, sizeof sb);
            snprintf(why, cap, "'%s' is %s against %s", x->name, sa, sb);
            return 1;
        }
    }
    if (a->count != b->count || a->total != b->total) {
        snprintf(why, cap, "%d tensors against %d", a->count, b->count);
        return 1;
    }
    return 0;
}

int param_table_equal(const param_table_t *a, const param_table_t *b) { return !param_table_difference(a, b, NULL, 0); }
