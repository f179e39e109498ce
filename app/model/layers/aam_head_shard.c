// The sharded AAM-softmax head's step (app/model/layers/aam_head_shard.h).
#include "app/model/layers/aam_head_shard.h"

#include "kernels/base/check.h"
#include "kernels/base/spk_assert.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct aam_head_shard {
    int cap_g;        // rows of the global batch the buffers hold
    int64_t *counts;  // (K) each rank's samples in the last forward
    int G, B, off;    // the global batch, this rank's samples and its first row there
    // host
    float *h_emb;                  // (G, E) the global batch's embeddings, later their gradients
    float *h_own;                  // (B, E) this rank's embeddings, later their gradient
    int *h_labels;                 // (G)
    float *h_rows, *h_rows_all;    // (G, AAM_SHARD_ROW) this rank's row results, (K, G, ...) everyone's
    int *h_argmax, *h_argmax_all;  // (G), (K, G)
    float *h_factor;               // (G)
    // backend
    float *emb, *rows, *factor, *cache, *work, *demb;
    int *labels, *argmax;
};

aam_head_shard_t *aam_head_shard_create(void) { return callocCheck(1, sizeof(aam_head_shard_t)); }

static void release(aam_head_shard_t *s, const model_t *m) {
    void *host[] = {s->h_emb,      s->h_own,    s->h_labels,     s->h_rows,
                    s->h_rows_all, s->h_argmax, s->h_argmax_all, s->h_factor};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
    float **dev[] = {&s->emb,  &s->rows, &s->factor,           &s->cache,
                     &s->work, &s->demb, (float **)&s->labels, (float **)&s->argmax};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) model_buf_free(m, dev[i]);
    int64_t *counts = s->counts;
    memset(s, 0, sizeof *s);
    s->counts = counts;
}

void aam_head_shard_free(aam_head_shard_t *s, const model_t *m) {
    if (!s) return;
    release(s, m);
    free(s->counts);
    free(s);
}

static void reserve(aam_head_shard_t *s, const model_t *m, int G, int K, int E) {
    if (!s->counts) s->counts = mallocCheck((size_t)K * sizeof(int64_t));  // K never changes
    if (G <= s->cap_g) return;
    release(s, m);
    const int S = (int)m->head_rows;
    const size_t g = (size_t)G, e = (size_t)E;
    s->h_emb = mallocCheck(g * e * sizeof(float));
    s->h_own = mallocCheck(g * e * sizeof(float));
    s->h_labels = mallocCheck(g * sizeof(int));
    s->h_rows = mallocCheck(g * AAM_SHARD_ROW * sizeof(float));
    s->h_rows_all = mallocCheck((size_t)K * g * AAM_SHARD_ROW * sizeof(float));
    s->h_argmax = mallocCheck(g * sizeof(int));
    s->h_argmax_all = mallocCheck((size_t)K * g * sizeof(int));
    s->h_factor = mallocCheck(g * sizeof(float));
    s->emb = model_buf(m, g * e);
    s->demb = model_buf(m, g * e);
    s->rows = model_buf(m, g * AAM_SHARD_ROW);
    s->factor = model_buf(m, g);
    s->labels = (int *)model_buf(m, g);  // ints in float-sized slots
    s->argmax = (int *)model_buf(m, g);
    s->cache = model_buf(m, m->be->aam_shard_cache_floats(G, E, S));
    s->work = model_buf(m, m->be->aam_shard_workspace_floats(G, E, S));
    s->cap_g = G;
}

// Every rank's row results into each row's loss (log-sum-exp over the slices minus the
// label's logit) and first maximum; this rank's scaling factors; the loss sum and hits of this
// rank's rows.
static void combine(aam_head_shard_t *s, int K, int rank, double *loss_sum, int *hits) {
    const int G = s->G;
    *loss_sum = 0.0;
    *hits = 0;
    for (int g = 0; g < G; g++) {
        double mx = -INFINITY, sum = 0.0, target = 0.0, best = -INFINITY;
        int arg = -1;
        for (int k = 0; k < K; k++) mx = fmax(mx, s->h_rows_all[((size_t)k * G + g) * AAM_SHARD_ROW + AAM_SHARD_LSE]);
        for (int k = 0; k < K; k++) {  // in rank order: class order, so the first maximum is the first class's
            const float *r = s->h_rows_all + ((size_t)k * G + g) * AAM_SHARD_ROW;
            sum += exp((double)r[AAM_SHARD_LSE] - mx);
            target += r[AAM_SHARD_TARGET];  // one rank holds the label; the others add 0
            if (r[AAM_SHARD_COSMAX] > best) best = r[AAM_SHARD_COSMAX], arg = s->h_argmax_all[(size_t)k * G + g];
        }
        const double lse = mx + log(sum);
        s->h_factor[g] =
            (float)exp((double)s->h_rows_all[((size_t)rank * G + g) * AAM_SHARD_ROW + AAM_SHARD_LSE] - lse);
        if (g >= s->off && g < s->off + s->B) {
            *loss_sum += lse - target;
            *hits += arg == s->h_labels[g];
        }
    }
}

void aam_head_shard_forward(aam_head_shard_t *s, model_t *m, const float *emb, const int *labels, int B, int E,
                            const float *w, float margin, float scale, float *scalars) {
    const head_comm_t *hc = m->head_comm;
    const spk_backend_t *K = m->be;
    SPK_ASSERT(hc && hc->size >= 1);
    reserve(s, m, 1, hc->size, E);
    hc->counts(hc->ctx, B, s->counts);
    int64_t G = 0, off = 0;
    for (int r = 0; r < hc->size; r++) {
        if (r == hc->rank) off = G;
        G += s->counts[r];
    }
    SPK_ASSERT(G > 0 && G < (1 << 30));
    reserve(s, m, (int)G, hc->size, E);
    s->G = (int)G;
    s->B = B;
    s->off = (int)off;
    if (B > 0) K->download(s->h_own, emb, (size_t)B * E * sizeof(float));
    hc->allgather(hc->ctx, s->h_own, s->h_emb, s->counts, (size_t)E * sizeof(float));
    hc->allgather(hc->ctx, labels, s->h_labels, s->counts, sizeof(int));
    K->upload(s->emb, s->h_emb, (size_t)G * E * sizeof(float));
    K->upload(s->labels, s->h_labels, (size_t)G * sizeof(int));
    K->aam_shard_forward(s->rows, s->argmax, s->cache, s->emb, w, s->labels, s->G, E, (int)m->head_rows,
                         (int)m->head_first, margin, scale);
    K->download(s->h_rows, s->rows, (size_t)G * AAM_SHARD_ROW * sizeof(float));
    K->download(s->h_argmax, s->argmax, (size_t)G * sizeof(int));
    int64_t *every = mallocCheck((size_t)hc->size * sizeof(int64_t));  // every rank sends all G rows
    for (int r = 0; r < hc->size; r++) every[r] = G;
    hc->allgather(hc->ctx, s->h_rows, s->h_rows_all, every, AAM_SHARD_ROW * sizeof(float));
    hc->allgather(hc->ctx, s->h_argmax, s->h_argmax_all, every, sizeof(int));
    free(every);
    double loss_sum;
    int hits;
    combine(s, hc->size, hc->rank, &loss_sum, &hits);
    K->upload(s->factor, s->h_factor, (size_t)G * sizeof(float));
    float v[2] = {B > 0 ? (float)(loss_sum / B) : 0.0f, 0.0f};
    memcpy(&v[1], &hits, sizeof hits);
    K->upload(scalars, v, sizeof v);
}

void aam_head_shard_backward(aam_head_shard_t *s, model_t *m, float *g_emb, float *dw, int E, float margin,
                             float scale) {
    const head_comm_t *hc = m->head_comm;
    const spk_backend_t *K = m->be;
    const int G = s->G, B = s->B;
    SPK_ASSERT(B > 0);
    K->aam_shard_backward(s->demb, dw, s->factor, 1.0f / (float)G, s->cache, s->labels, G, E, (int)m->head_rows,
                          (int)m->head_first, margin, scale, s->work);
    K->download(s->h_emb, s->demb, (size_t)G * E * sizeof(float));
    hc->reduce_scatter(hc->ctx, s->h_emb, s->h_own, s->counts, (size_t)E);
    // d (global mean) / d emb times G / B: the gradient of this rank's mean, which the
    // gradient averaging over the ranks turns back into the global mean's
    const float up = (float)G / (float)B;
    for (size_t i = 0; i < (size_t)B * E; i++) s->h_own[i] *= up;
    K->upload(g_emb, s->h_own, (size_t)B * E * sizeof(float));
}
