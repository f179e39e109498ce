#include "app/model/layers/bn_sets.h"

#include "kernels/base/spk_assert.h"

bn_sets_t model_bn_sets(const model_t *m, int B) {
    if (!m->bn_by_group) return (bn_sets_t){1, B, m->global_batch};
    SPK_ASSERT(B % m->group == 0);
    return (bn_sets_t){B / m->group, m->group, m->group};
}

int model_bn_set_runs(const model_t *m, int i) { return !m->bn_by_group || (i == 0 && m->batch_offset == 0); }

size_t model_bn_stats_floats(const model_t *m, int B, int C) {
    return (size_t)(m->bn_by_group ? B / m->group : 1) * (size_t)C;
}

xsum_t model_bn_stats_sums(model_t *m, int64_t n) {
    if (n > m->xstats_cap) {
        model_xsum_free(m, &m->xstats);
        m->xstats = model_xsum(m, n);
        m->xstats_cap = n;
    }
    m->be->xsum_zero(m->xstats, n);
    return m->xstats;
}
