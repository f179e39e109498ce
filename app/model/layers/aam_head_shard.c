// The sharded AAM-softmax head's step (app/model/layers/aam_head_shard.h).
#include "app/model/layers/aam_head_shard.h"

#include "kernels/aam_layout.h"
#include "kernels/base/check.h"
#include "kernels/base/rng.h"
#include "kernels/base/spk_assert.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct aam_head_shard {
    int cap_g;        // rows of the global batch the buffers hold
    int64_t *counts;  // (K) each rank's samples in the last forward
    int64_t *every;   // (K) the global batch's size for every rank: each sends all its rows' results
    int G, B, off;    // the global batch, this rank's samples and its first row there
    int device;       // the last forward's embeddings were gathered on the device (NCCL)
    // host
    float *h_emb;                  // (G, E) the global batch's embeddings, later their gradients
    float *h_own;                  // (B, E) this rank's embeddings, later their gradient
    int *h_labels;                 // (G)
    float *h_rows, *h_rows_all;    // (G, AAM_SHARD_ROW) this rank's row results, (K, G, ...) everyone's
    int *h_argmax, *h_argmax_all;  // (G), (K, G)
    float *h_factor;               // (G)
    // backend
    float *emb, *rows, *factor, *cache, *work, *demb;
    int *labels, *argmax;  // labels: the global ones, or with sampling their positions among the sampled
    // Partial FC's class sampling (aam_head_shard_sample): each step scores the batch's classes
    // and a keyed random fraction of the others.
    double rate;  // 1: every class
    int sampled;  // the last forward scored the sampled rows only
    uint64_t seed;
    int n;               // classes scored this step (this rank's rows, or those sampled)
    int *h_idx, *h_pos;  // (S) the sampled rows; each row's position among them or -1 (scratch after)
    int *idx;            // (S) backend copy of h_idx
    int *cls;            // (S) the invariant mode: the sampled rows' global classes (backend)
    float *w_s, *dw_s;   // (S, E) the sampled rows' weights and gradient
    xsum_t x_dw_s;       // the invariant mode: the sampled rows' gradient sums (cap_dw_s rows)
    int cap_dw_s;
    // The invariant mode's exact sums over the classes: each row's softmax denominator (G) and
    // the gradient w.r.t. the normalised embeddings (G, E), on the backend and on the host (for
    // the exact allreduce); factor then holds each row's largest logit and denominator.
    xsum_t x_den, x_dehat, h_den;
    void *h_den_buf;
};

aam_head_shard_t *aam_head_shard_create(void) {
    aam_head_shard_t *s = callocCheck(1, sizeof(aam_head_shard_t));
    s->rate = 1.0;
    return s;
}

// Frees the buffers sized by the global batch (the sampling's, sized by the slice, stay).
static void release(aam_head_shard_t *s, const model_t *m) {
    void **host[] = {(void **)&s->h_emb,      (void **)&s->h_own,    (void **)&s->h_labels,     (void **)&s->h_rows,
                     (void **)&s->h_rows_all, (void **)&s->h_argmax, (void **)&s->h_argmax_all, (void **)&s->h_factor};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) {
        free(*host[i]);
        *host[i] = NULL;
    }
    float **dev[] = {&s->emb,  &s->rows, &s->factor,           &s->cache,
                     &s->work, &s->demb, (float **)&s->labels, (float **)&s->argmax};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) model_buf_free(m, dev[i]);
    model_xsum_free(m, &s->x_den);
    model_xsum_free(m, &s->x_dehat);
    free(s->h_den_buf);
    s->h_den_buf = NULL;
    s->cap_g = 0;
}

void aam_head_shard_free(aam_head_shard_t *s, const model_t *m) {
    if (!s) return;
    release(s, m);
    free(s->counts);
    free(s->every);
    free(s->h_idx);
    free(s->h_pos);
    float **dev[] = {&s->w_s, &s->dw_s, (float **)&s->idx, (float **)&s->cls};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) model_buf_free(m, dev[i]);
    model_xsum_free(m, &s->x_dw_s);
    free(s);
}

void aam_head_shard_sample(aam_head_shard_t *s, double rate, uint64_t seed) {
    s->rate = rate;
    s->seed = seed;
}

// The rows this step scores: the global batch's labels that are this rank's, and every other
// row with probability `rate`, drawn from (seed, step, class) so that any number of ranks
// samples the same classes. Their weights into w_s, the labels as positions among them. In the
// invariant mode a slice may score none (s->n 0: no rank may add a class of its own choosing).
static const float *sample_rows(aam_head_shard_t *s, const model_t *m, const float *w, int E) {
    const int S = (int)m->head_rows, first = (int)m->head_first;
    const spk_backend_t *K = m->be;
    if (!s->h_idx) {
        s->h_idx = mallocCheck((size_t)S * sizeof(int));
        s->h_pos = mallocCheck((size_t)S * sizeof(int));
        s->idx = (int *)model_buf(m, (size_t)S);
        s->cls = m->invariant ? (int *)model_buf(m, (size_t)S) : NULL;
        s->w_s = model_buf(m, (size_t)S * E);
        s->dw_s = model_buf(m, (size_t)S * E);
    }
    for (int c = 0; c < S; c++) s->h_pos[c] = 0;
    for (int g = 0; g < s->G; g++) {
        const int y = s->h_labels[g] - first;
        if (y >= 0 && y < S) s->h_pos[y] = 1;
    }
    s->n = 0;
    for (int c = 0; c < S; c++) {
        if (!s->h_pos[c]) {
            rng_t r = rng_init(s->seed, RNG_PURPOSE_CLASS_SAMPLE, (uint64_t)m->step_key, (uint64_t)(first + c));
            s->h_pos[c] = rng_uniform(&r) < s->rate;
        }
        s->h_pos[c] = s->h_pos[c] ? s->n : -1;
        if (s->h_pos[c] >= 0) s->h_idx[s->n++] = c;
    }
    if (s->n == 0 && !m->invariant) s->h_pos[s->h_idx[s->n++] = 0] = 0;  // a slice is never empty
    int *lab = s->h_argmax;  // (free until the forward's results) the labels as positions among the sampled
    for (int g = 0; g < s->G; g++) {
        const int y = s->h_labels[g] - first;
        lab[g] = y >= 0 && y < S ? s->h_pos[y] : -1;
    }
    K->upload(s->labels, lab, (size_t)s->G * sizeof(int));
    K->upload(s->idx, s->h_idx, (size_t)s->n * sizeof(int));
    if (s->cls) {  // their global classes, for the blocks (h_pos is free now)
        for (int j = 0; j < s->n; j++) s->h_pos[j] = first + s->h_idx[j];
        K->upload(s->cls, s->h_pos, (size_t)s->n * sizeof(int));
    }
    K->rows_gather(s->w_s, w, s->idx, s->n, E);
    return s->w_s;
}

static void reserve(aam_head_shard_t *s, const model_t *m, int G, int E) {
    if (G <= s->cap_g) return;
    release(s, m);
    const int S = (int)m->head_rows, K = m->head_comm->size;
    const size_t g = (size_t)G, e = (size_t)E;
    s->h_emb = mallocCheck(g * e * sizeof(float));
    s->h_own = mallocCheck(g * e * sizeof(float));
    s->h_labels = mallocCheck(g * sizeof(int));
    s->h_rows = mallocCheck(g * AAM_SHARD_ROW * sizeof(float));
    s->h_rows_all = mallocCheck((size_t)K * g * AAM_SHARD_ROW * sizeof(float));
    s->h_argmax = mallocCheck(g * sizeof(int));
    s->h_argmax_all = mallocCheck((size_t)K * g * sizeof(int));
    s->h_factor = mallocCheck(2 * g * sizeof(float));
    s->emb = model_buf(m, g * e);
    s->demb = model_buf(m, g * e);
    s->rows = model_buf(m, g * AAM_SHARD_ROW);
    s->factor = model_buf(m, 2 * g);     // (the invariant mode: largest logit | denominator)
    s->labels = (int *)model_buf(m, g);  // ints in float-sized slots
    s->argmax = (int *)model_buf(m, g);
    s->cache = model_buf(m, m->be->aam_shard_cache_floats(G, E, S));
    s->work = model_buf(m, m->be->aam_shard_workspace_floats(G, E, S));
    if (m->invariant) {  // (laid out for G sums: a smaller batch uses the first of each part)
        s->x_den = model_xsum(m, G);
        s->x_dehat = model_xsum(m, (int64_t)G * E);
        s->h_den = xsum_layout(s->h_den_buf = mallocCheck(xsum_bytes(G)), G);
    }
    s->cap_g = G;
}

// The first G of the denominators' exact sums (on the backend) = their sums over every rank, and
// their host copy h_den. Both are laid out for cap_g sums, so each part moves on its own.
static void den_allreduce(const model_t *m, aam_head_shard_t *s, int64_t G) {
    const head_comm_t *hc = m->head_comm;
    hc->exact_allreduce(hc->ctx, s->x_den, G);
    spk_xsum_download(m->be, s->h_den, s->x_den, G);
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

// The invariant mode's combination: each row's largest logit over the slices (exact, as any
// maximum), then the exact sums of exp(logit - largest) over every class, and from them each
// row's loss, the same bits on any number of ranks. row_loss: this rank's rows' (host).
static void combine_exact(aam_head_shard_t *s, model_t *m, int E, float *row_loss, int *hits) {
    const head_comm_t *hc = m->head_comm;
    const spk_backend_t *K = m->be;
    const int G = s->G, R = hc->size;
    float *mx = s->h_factor, *den = s->h_factor + G;
    for (int g = 0; g < G; g++) {
        mx[g] = -INFINITY;
        for (int k = 0; k < R; k++)
            mx[g] = fmaxf(mx[g], s->h_rows_all[((size_t)k * G + g) * AAM_SHARD_ROW + AAM_SHARD_LSE]);
    }
    K->upload(s->factor, mx, (size_t)G * sizeof(float));
    K->xsum_zero(s->x_den, G);
    if (s->n > 0) K->aam_shard_expsum_exact(s->x_den, s->factor, s->cache, G, E, s->n);
    den_allreduce(m, s, G);
    *hits = 0;
    for (int g = 0; g < G; g++) {
        const double sum = xsum_value_of(s->h_den, g);
        double target = 0.0;
        float best = -INFINITY;
        int arg = -1;
        for (int k = 0; k < R; k++) {  // in rank order: class order, so the first maximum is the first class's
            const float *r = s->h_rows_all + ((size_t)k * G + g) * AAM_SHARD_ROW;
            target += r[AAM_SHARD_TARGET];
            if (r[AAM_SHARD_COSMAX] > best) best = r[AAM_SHARD_COSMAX], arg = s->h_argmax_all[(size_t)k * G + g];
        }
        den[g] = (float)sum;
        if (g >= s->off && g < s->off + s->B) {
            row_loss[g - s->off] = (float)((double)mx[g] + log(sum) - target);
            *hits += arg == s->h_labels[g];
        }
    }
    K->upload(s->factor, s->h_factor, 2 * (size_t)G * sizeof(float));
}

void aam_head_shard_forward(aam_head_shard_t *s, model_t *m, const float *emb, const int *labels, int B, int E,
                            const float *w, int train, float margin, float scale, float *scalars, float *row_loss) {
    const head_comm_t *hc = m->head_comm;
    const spk_backend_t *K = m->be;
    SPK_ASSERT(hc && hc->size >= 1);
    if (!s->counts) {
        s->counts = mallocCheck((size_t)hc->size * sizeof(int64_t));
        s->every = mallocCheck((size_t)hc->size * sizeof(int64_t));
    }
    hc->counts(hc->ctx, B, s->counts);
    int64_t G = 0, off = 0;
    for (int r = 0; r < hc->size; r++) {
        if (r == hc->rank) off = G;
        G += s->counts[r];
    }
    SPK_ASSERT(G > 0 && G < (1 << 30));
    reserve(s, m, (int)G, E);
    s->G = (int)G;
    s->B = B;
    s->off = (int)off;
    s->device = head_comm_on_device(hc, s->counts);
    if (s->device) {  // gathered where they are
        hc->allgather_device(hc->ctx, emb, s->emb, (int64_t)B * E);
    } else {
        if (B > 0) K->download(s->h_own, emb, (size_t)B * E * sizeof(float));
        hc->allgather(hc->ctx, s->h_own, s->h_emb, s->counts, (size_t)E * sizeof(float));
        K->upload(s->emb, s->h_emb, (size_t)G * E * sizeof(float));
    }
    hc->allgather(hc->ctx, labels, s->h_labels, s->counts, sizeof(int));
    for (int64_t g = 0; g < G; g++) SPK_ASSERT(s->h_labels[g] >= 0 && s->h_labels[g] < m->num_classes);
    const int sampled = s->sampled = train && s->rate < 1.0;  // evaluation scores every class
    if (sampled) {
        w = sample_rows(s, m, w, E);
    } else {
        s->n = (int)m->head_rows;
        K->upload(s->labels, s->h_labels, (size_t)G * sizeof(int));
    }
    const int first = sampled ? 0 : (int)m->head_first;  // sampled: rows and labels are positions
    if (s->n == 0) {  // (the invariant mode's sampling may leave a slice nothing to score)
        for (int g = 0; g < G; g++) {
            float *r = s->h_rows + (size_t)g * AAM_SHARD_ROW;
            r[AAM_SHARD_LSE] = r[AAM_SHARD_COSMAX] = -INFINITY;
            r[AAM_SHARD_TARGET] = 0.0f;
            s->h_argmax[g] = -1;
        }
    } else {
        if (m->invariant)
            K->aam_shard_forward_fixed(s->rows, s->argmax, s->cache, s->emb, w, s->labels, sampled ? s->cls : NULL,
                                       s->G, E, s->n, first, aam_shard_block(m->num_classes), margin, scale);
        else
            K->aam_shard_forward(s->rows, s->argmax, s->cache, s->emb, w, s->labels, s->G, E, s->n, first, margin,
                                 scale);
        K->download(s->h_rows, s->rows, (size_t)G * AAM_SHARD_ROW * sizeof(float));
        K->download(s->h_argmax, s->argmax, (size_t)G * sizeof(int));
        if (sampled)  // back to global classes
            for (int g = 0; g < s->G; g++) s->h_argmax[g] = (int)m->head_first + s->h_idx[s->h_argmax[g]];
    }
    for (int r = 0; r < hc->size; r++) s->every[r] = G;
    hc->allgather(hc->ctx, s->h_rows, s->h_rows_all, s->every, AAM_SHARD_ROW * sizeof(float));
    hc->allgather(hc->ctx, s->h_argmax, s->h_argmax_all, s->every, sizeof(int));
    double loss_sum = 0.0;
    int hits;
    if (m->invariant) {            // each sample's loss (row_loss), summed exactly by the caller
        float *h_loss = s->h_own;  // (free until the backward)
        combine_exact(s, m, E, h_loss, &hits);
        if (B > 0) K->upload(row_loss, h_loss, (size_t)B * sizeof(float));
    } else {
        combine(s, hc->size, hc->rank, &loss_sum, &hits);
        K->upload(s->factor, s->h_factor, (size_t)G * sizeof(float));
    }
    float v[2] = {B > 0 ? (float)(loss_sum / B) : 0.0f, 0.0f};
    memcpy(&v[1], &hits, sizeof hits);
    K->upload(scalars, v, sizeof v);
}

// The invariant mode's backward: the class rows' gradient into their exact sums (each group
// of samples one term, as the replicated head's), the embeddings' gradient summed exactly over
// the classes of every slice, then through their normalisation for this rank's rows. Each
// sample's loss weighs 1 / G, and the encoder's exact sums add the ranks' samples up.
static void backward_exact(aam_head_shard_t *s, model_t *m, float *g_emb, float *dw, xsum_t xdw, int E, float margin,
                           float scale) {
    const spk_backend_t *K = m->be;
    const head_comm_t *hc = m->head_comm;
    const int G = s->G, B = s->B, block = aam_shard_block(m->num_classes);
    K->xsum_zero(s->x_dehat, (int64_t)G * E);
    if (s->sampled && s->n > 0) {  // the sampled rows' sums, then added to their rows'
        if (s->n > s->cap_dw_s) {
            model_xsum_free(m, &s->x_dw_s);
            s->x_dw_s = model_xsum(m, (int64_t)s->n * E);
            s->cap_dw_s = s->n;
        }
        K->xsum_zero(s->x_dw_s, (int64_t)s->n * E);
        K->aam_shard_backward_exact(s->x_dehat, s->dw_s, s->x_dw_s, s->factor, 1.0f / (float)G, s->cache, s->labels,
                                    s->cls, G, E, s->n, 0, block, margin, scale, s->work, m->group);
        K->xsum_rows_add(xdw, s->x_dw_s, s->idx, s->n, E);
    } else if (s->n > 0) {
        K->aam_shard_backward_exact(s->x_dehat, dw, xdw, s->factor, 1.0f / (float)G, s->cache, s->labels, NULL, G, E,
                                    s->n, (int)m->head_first, block, margin, scale, s->work, m->group);
    }
    hc->exact_allreduce(hc->ctx, s->x_dehat, (int64_t)G * E);
    K->xsum_to_float(s->demb, s->x_dehat, (int64_t)G * E);
    // This rank's rows through their normalisation, normalised again here: a slice that scored
    // no class has no cache of them, and every rank must compute them alike.
    float *z = s->work, *norm = s->work + (size_t)B * E;
    const size_t o = (size_t)s->off;
    K->rows_normalize_forward(z, norm, s->emb + o * E, B, E, AAM_NORM_EPS);
    K->rows_normalize_backward(g_emb, s->demb + o * E, z, norm, B, E, AAM_NORM_EPS);
}

void aam_head_shard_backward(aam_head_shard_t *s, model_t *m, float *g_emb, float *dw, xsum_t xdw, int E, float margin,
                             float scale) {
    const head_comm_t *hc = m->head_comm;
    const spk_backend_t *K = m->be;
    const int G = s->G, B = s->B;
    SPK_ASSERT(B > 0);
    if (m->invariant) {
        backward_exact(s, m, g_emb, dw, xdw, E, margin, scale);
        return;
    }
    if (s->sampled) {  // the sampled rows' gradient, added to their rows
        K->vec_zero(s->dw_s, (size_t)s->n * E);
        K->aam_shard_backward(s->demb, s->dw_s, s->factor, 1.0f / (float)G, s->cache, s->labels, G, E, s->n, 0, margin,
                              scale, s->work);
        K->rows_scatter_add(dw, s->dw_s, s->idx, s->n, E);
    } else {
        K->aam_shard_backward(s->demb, dw, s->factor, 1.0f / (float)G, s->cache, s->labels, G, E, s->n,
                              (int)m->head_first, margin, scale, s->work);
    }
    // d (global mean) / d emb times G / B: the gradient of this rank's mean, which the
    // gradient averaging over the ranks turns back into the global mean's
    const float up = (float)G / (float)B;
    if (s->device) {  // summed where they are
        hc->reduce_scatter_device(hc->ctx, s->demb, g_emb, (int64_t)B * E);
        K->vec_scale(g_emb, up, (size_t)B * E);
        return;
    }
    K->download(s->h_emb, s->demb, (size_t)G * E * sizeof(float));
    hc->reduce_scatter(hc->ctx, s->h_emb, s->h_own, s->counts, (size_t)E);
    for (size_t i = 0; i < (size_t)B * E; i++) s->h_own[i] *= up;
    K->upload(g_emb, s->h_own, (size_t)B * E * sizeof(float));
}
