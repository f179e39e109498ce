// A training step's staging and statistics (app/model/core/model_stats.h).
#include "app/model/core/model_stats.h"

#include "kernels/base/spk_assert.h"

#include <string.h>

void model_stage_begin(model_t *m, size_t bytes) {
    SPK_ASSERT(m->stats_pending <= 1);  // the older pending step's slot is about to be reused
    m->be->staging_begin(m->staging, bytes + 4 * SPK_STAGING_ALIGN);
}

const void *model_stage(model_t *m, const void *host, size_t bytes) {
    return m->be->staging_put(m->staging, host, bytes);
}

void model_stage_ready(model_t *m) { m->be->staging_ready(m->staging); }

_Static_assert(sizeof(int) == sizeof(float), "the correct count shares the loss's float buffer");

void model_stats_fetch(model_t *m, const float *scalars, int n) {
    SPK_ASSERT(m->stats_pending <= 1);
    m->be->staging_fetch(m->staging, scalars, 2 * sizeof(float));
    // The invariant mode's loss is the exact sum model_sum_losses left, read now (the mode
    // waits for the device within every step anyway), before the next step overwrites it.
    if (m->invariant) m->stats_loss[m->stats_pending] = model_loss_sum(m);
    m->stats_n[m->stats_pending++] = n;
}

int model_read_stats(model_t *m, step_stats_t *st) {
    if (m->stats_pending == 0) return 0;
    const float *v = m->be->staging_fetched(m->staging, m->stats_pending - 1);
    int correct;
    memcpy(&correct, &v[1], sizeof correct);
    const int n = m->stats_n[0];
    if (m->invariant)
        xsum_merge(xsum_cell(&st->loss_exact), xsum_cell(&m->stats_loss[0]), 1);
    else
        st->loss_sum += (double)v[0] * n;
    st->correct += correct;
    st->count += n;
    m->stats_n[0] = m->stats_n[1];
    m->stats_loss[0] = m->stats_loss[1];
    m->stats_pending--;
    return 1;
}

static xsum_cell_t read_cell(const model_t *m, xsum_t s) {
    xsum_cell_t c;
    m->be->download(&c.bin, s.bin, sizeof c.bin);
    m->be->download(&c.hi, s.hi, sizeof c.hi);
    m->be->download(&c.lo, s.lo, sizeof c.lo);
    return c;
}

int64_t model_begin_step(model_t *m, int B) {
    m->global_batch = B;
    if (!m->invariant) return B;
    SPK_ASSERT(B % m->group == 0);
    const float n = (float)B;
    const xsum_t s = xsum_at(m->xcells, 0);
    m->be->upload(m->fcells, &n, sizeof n);
    m->be->xsum_zero(s, 1);
    m->be->xsum_add(s, m->fcells, 1, 1, 1);
    model_exact_allreduce(m, s, 1);
    xsum_cell_t c = read_cell(m, s);
    m->global_batch = (int64_t)xsum_value_of(xsum_cell(&c), 0);
    return m->global_batch;
}

void model_sum_losses(model_t *m, const float *row_loss, int B, int group) {
    const xsum_t s = xsum_at(m->xcells, 1);
    m->be->xsum_zero(s, 1);
    m->be->xsum_add(s, row_loss, B, 1, group);
}

xsum_cell_t model_loss_sum(const model_t *m) { return read_cell(m, xsum_at(m->xcells, 1)); }
