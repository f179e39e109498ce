// DINO's projection head with synchronized BatchNorm (app/model/layers/dino_head.h).
#include "app/model/layers/dino_head.h"

#include "app/model/layers/model_layers.h"

#include "kernels/base/rng.h"
#include "kernels/base/spk_assert.h"

#include <math.h>
#include <stdio.h>

#define BN_EPS      1e-5f
#define BN_MOMENTUM 0.1f
#define NORM_EPS    1e-12f  // F.normalize's

// A tensor of the head: "dino_head.<name>", (rows, cols) or (rows) when cols is 0.
static int64_t add(param_table_t *t, const char *name, int64_t rows, int64_t cols) {
    char full[PARAM_NAME_MAX];
    snprintf(full, sizeof full, "dino_head.%s", name);
    return param_table_add(t, full, cols ? 2 : 1, (int64_t[]){rows, cols});
}

void dino_head_register(dino_head_t *h, model_t *m, const model_config_t *cfg, int64_t emb_dim) {
    h->E = (int)emb_dim, h->H = (int)cfg->dino_hidden, h->D = (int)cfg->dino_bottleneck, h->K = (int)cfg->dino_out;
    char name[32];
    for (int l = 0; l < 2; l++) {  // mlp.0 (Linear), mlp.1 (BatchNorm); mlp.3, mlp.4
        dino_hidden_t *y = &h->layer[l];
        y->in_dim = l ? h->H : h->E;
        snprintf(name, sizeof name, "mlp.%d.weight", 3 * l);
        y->w = add(&m->table, name, h->H, y->in_dim);
        snprintf(name, sizeof name, "mlp.%d.bias", 3 * l);
        y->b = add(&m->table, name, h->H, 0);
        snprintf(name, sizeof name, "mlp.%d.weight", 3 * l + 1);
        y->g = add(&m->table, name, h->H, 0);
        snprintf(name, sizeof name, "mlp.%d.bias", 3 * l + 1);
        y->beta = add(&m->table, name, h->H, 0);
    }
    h->w6 = add(&m->table, "mlp.6.weight", h->D, h->H), h->b6 = add(&m->table, "mlp.6.bias", h->D, 0);
    h->v = add(&m->table, "last_layer.weight_v", h->K, h->D);
    for (int l = 0; l < 2; l++) {
        snprintf(name, sizeof name, "mlp.%d.running_mean", 3 * l + 1);
        h->layer[l].rm = add(&m->state_table, name, h->H, 0);
        snprintf(name, sizeof name, "mlp.%d.running_var", 3 * l + 1);
        h->layer[l].rv = add(&m->state_table, name, h->H, 0);
    }
}

int64_t dino_head_end(const dino_head_t *h) { return h->v + (int64_t)h->K * h->D; }

// Truncated normal, std 0.02, cut at +-2 (timm's trunc_normal_, which the toolkits use).
static float trunc_normal(rng_t *r) {
    for (;;) {
        const double x = rng_normal(r);
        if (fabs(x) <= 2.0 / 0.02) return (float)(0.02 * x);
    }
}

// The table index of the tensor at offset off: the key of its draws, as the families key theirs.
static uint64_t index_of(const model_t *m, int64_t off) {
    for (int i = 0; i < m->table.count; i++)
        if (m->table.t[i].offset == off) return (uint64_t)i;
    SPK_ASSERT(0);
    return 0;
}

void dino_head_init(const dino_head_t *h, model_t *m, uint64_t seed) {
    float *p = m->host_params;
    for (int k = 0; k < 3; k++) {
        const int64_t w = k < 2 ? h->layer[k].w : h->w6,
                      n = k < 2 ? (int64_t)h->H * h->layer[k].in_dim : (int64_t)h->D * h->H;
        rng_t r = rng_init(seed, RNG_PURPOSE_INIT, index_of(m, w), 0);
        for (int64_t i = 0; i < n; i++) p[w + i] = trunc_normal(&r);
    }
    for (int l = 0; l < 2; l++) {
        const dino_hidden_t *y = &h->layer[l];
        for (int i = 0; i < h->H; i++) {
            p[y->b + i] = p[y->beta + i] = 0.0f;
            p[y->g + i] = 1.0f;
            m->host_state[y->rm + i] = 0.0f;
            m->host_state[y->rv + i] = 1.0f;
        }
    }
    for (int i = 0; i < h->D; i++) p[h->b6 + i] = 0.0f;
    rng_t r = rng_init(seed, RNG_PURPOSE_INIT, index_of(m, h->v), 0);
    const double bound = 1.0 / sqrt((double)h->D);
    for (int64_t i = 0; i < (int64_t)h->K * h->D; i++) p[h->v + i] = (float)((2.0 * rng_uniform(&r) - 1.0) * bound);
}

#define ROW_BUFS(h)                                                                                             \
    {                                                                                                           \
        &h->layer[0].h, &h->layer[0].y, &h->layer[0].a, &h->layer[1].h, &h->layer[1].y, &h->layer[1].a, &h->ga, \
            &h->gb, &h->gc, &h->p, &h->z, &h->gp, &h->gz, &h->pnorm                                             \
    }
#define FIXED_BUFS(h)                                                                                           \
    {                                                                                                           \
        &h->layer[0].mean, &h->layer[0].rstd, &h->layer[1].mean, &h->layer[1].rstd, &h->wn, &h->gwn, &h->vnorm, \
            &h->local                                                                                           \
    }

// Buffers for N rows: those of the rows grow, the rest are made once.
static void reserve(dino_head_t *h, const model_t *m, int N) {
    const int H = h->H, D = h->D;
    if (!h->wn) {
        for (int l = 0; l < 2; l++)
            h->layer[l].mean = model_buf(m, (size_t)H), h->layer[l].rstd = model_buf(m, (size_t)H);
        h->wn = model_buf(m, (size_t)h->K * D), h->gwn = model_buf(m, (size_t)h->K * D);
        h->vnorm = model_buf(m, (size_t)h->K);
        h->local = model_buf(m, 2 * (size_t)H);
        h->sums = model_xsum(m, 2 * (int64_t)H);
    }
    if (N <= h->cap) return;
    float **const rows[] = ROW_BUFS(h);
    model_bufs_free(m, rows, sizeof rows / sizeof rows[0]);
    for (int i = 0; i < 9; i++) *rows[i] = model_buf(m, (size_t)N * H);
    for (int i = 9; i < 13; i++) *rows[i] = model_buf(m, (size_t)N * D);
    h->pnorm = model_buf(m, (size_t)N);
    h->cap = N;
}

void dino_head_release(dino_head_t *h, const model_t *m) {
    float **const rows[] = ROW_BUFS(h), **const fixed[] = FIXED_BUFS(h);
    model_bufs_free(m, rows, sizeof rows / sizeof rows[0]);
    model_bufs_free(m, fixed, sizeof fixed / sizeof fixed[0]);
    model_xsum_free(m, &h->sums);
    h->cap = 0;
}

// Synchronized BatchNorm over every rank's rows, training mode: y, its statistics, the running ones.
static void bn_forward(dino_head_t *h, model_t *m, dino_hidden_t *y, int N, int64_t n_global) {
    const spk_backend_t *K = m->be;
    K->xsum_zero(h->sums, 2 * (int64_t)h->H);
    K->batchnorm1d_stats_partial(h->sums, y->h, m->state + y->rm, N, h->H, 1, 1);
    model_exact_allreduce(m, h->sums, 2 * (int64_t)h->H);
    K->batchnorm1d_forward_global(y->y, y->mean, y->rstd, m->state + y->rm, m->state + y->rv, y->h, m->params + y->g,
                                  m->params + y->beta, h->sums, n_global, N, h->H, 1, BN_EPS, BN_MOMENTUM);
}

// Its backward from dy to dx (+=): this rank's sums of dy and dy xhat are its share of the bias
// and weight gradients (which the gradient averaging then adds up); the input gradient takes
// the sums over every rank.
static void bn_backward(dino_head_t *h, model_t *m, const dino_hidden_t *y, float *dx, const float *dy, int N,
                        int64_t n_global) {
    const spk_backend_t *K = m->be;
    const int H = h->H, inv = m->invariant;
    K->xsum_zero(h->sums, 2 * (int64_t)H);
    // The invariant mode adds the parameters' terms to the exact gradient sums directly.
    K->batchnorm1d_backward_partial(h->sums, inv ? xsum_at(m->xgrads, y->g) : xsum_none(),
                                    inv ? xsum_at(m->xgrads, y->beta) : xsum_none(), dy, y->h, y->mean, y->rstd, N, H,
                                    1, inv ? m->group : 1);
    if (!inv) {
        K->xsum_to_float(h->local, h->sums, 2 * (int64_t)H);
        K->vec_acc(m->grads + y->beta, h->local, (size_t)H);
        K->vec_acc(m->grads + y->g, h->local + H, (size_t)H);
    }
    model_exact_allreduce(m, h->sums, 2 * (int64_t)H);
    K->batchnorm1d_backward_global(dx, 0, dy, y->h, m->params + y->g, y->mean, y->rstd, h->sums, n_global, N, H, 1);
}

// A hidden layer on `in`: Linear, BatchNorm, GELU.
static void hidden_forward(dino_head_t *h, model_t *m, dino_hidden_t *y, const float *in, int N, int64_t n_global) {
    y->in = in;
    m->be->linear_forward(y->h, in, m->params + y->w, m->params + y->b, N, y->in_dim, h->H);
    bn_forward(h, m, y, N, n_global);
    m->be->gelu_forward(y->a, y->y, (size_t)N * h->H);
}

// Its backward from g_out, the gradient of its output (overwritten): its parameters'
// gradients, d_in (+=).
static void hidden_backward(dino_head_t *h, model_t *m, const dino_hidden_t *y, float *g_out, float *d_in, int N,
                            int64_t n_global) {
    const spk_backend_t *K = m->be;
    const size_t n = (size_t)N * h->H;
    K->vec_zero(h->gb, n);
    K->gelu_backward(h->gb, g_out, y->y, n);
    K->vec_zero(g_out, n);
    bn_backward(h, m, y, g_out, h->gb, N, n_global);
    model_linear_backward(m, d_in, y->w, y->b, g_out, y->in, N, y->in_dim, h->H);
}

void dino_head_forward(dino_head_t *h, model_t *m, const float *x, int N, int64_t n_global, float *logits) {
    const spk_backend_t *K = m->be;
    const int H = h->H, D = h->D;
    reserve(h, m, N);
    hidden_forward(h, m, &h->layer[0], x, N, n_global);
    hidden_forward(h, m, &h->layer[1], h->layer[0].a, N, n_global);
    const float *P = m->params;
    K->linear_forward(h->p, h->layer[1].a, P + h->w6, P + h->b6, N, H, D);
    K->rows_normalize_forward(h->z, h->pnorm, h->p, N, D, NORM_EPS);
    K->rows_normalize_forward(h->wn, h->vnorm, P + h->v, h->K, D, NORM_EPS);
    K->linear_forward(logits, h->z, h->wn, NULL, N, D, h->K);
}

void dino_head_backward(dino_head_t *h, model_t *m, const float *dlogits, float *dx, int N, int64_t n_global,
                        int freeze_last) {
    const spk_backend_t *K = m->be;
    const int H = h->H, D = h->D;
    SPK_ASSERT(N <= h->cap);
    const int P = h->K;
    K->vec_zero(h->gz, (size_t)N * D);
    K->spk_sgemm('N', 'N', N, D, P, 1.0f, dlogits, P, h->wn, D, 1.0f, h->gz, D);  // (invariant: row by row)
    // The prototypes' gradient: that of the normalised rows here, the normalisation's backward
    // once it is summed over the ranks (dino_head_after_averaging; both are linear in it).
    h->frozen = freeze_last;
    if (!freeze_last && m->invariant)
        model_gemm_grad_exact(m, 'T', 'N', P, D, 1, dlogits, P, P, h->z, D, D, h->v, D, N);
    else if (!freeze_last)
        K->spk_sgemm('T', 'N', P, D, N, 1.0f, dlogits, P, h->z, D, 1.0f, m->grads + h->v, D);
    K->vec_zero(h->gp, (size_t)N * D);
    K->rows_normalize_backward(h->gp, h->gz, h->z, h->pnorm, N, D, NORM_EPS);
    K->vec_zero(h->ga, (size_t)N * H);
    model_linear_backward(m, h->ga, h->w6, h->b6, h->gp, h->layer[1].a, N, H, D);
    K->vec_zero(h->gc, (size_t)N * H);
    hidden_backward(h, m, &h->layer[1], h->ga, h->gc, N, n_global);
    hidden_backward(h, m, &h->layer[0], h->gc, dx, N, n_global);
}

void dino_head_after_averaging(dino_head_t *h, model_t *m) {
    if (h->frozen || !h->wn) return;
    const spk_backend_t *K = m->be;
    const size_t n = (size_t)h->K * h->D;
    K->vec_copy(h->gwn, m->grads + h->v, n);
    K->vec_zero(m->grads + h->v, n);
    K->rows_normalize_backward(m->grads + h->v, h->gwn, h->wn, h->vnorm, h->K, h->D, NORM_EPS);
}
