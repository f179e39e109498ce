// A metric-learning loss over the global batch (app/model/layers/contrastive_head.h).
#include "app/model/layers/contrastive_head.h"

#include "kernels/base/check.h"
#include "kernels/base/spk_assert.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct contrastive_head {
    contrastive_kind_t kind;
    float scale, weight;
    int M;         // utterances per speaker group (angleproto, ge2e)
    int local;     // --negatives local
    int instance;  // --labels utterance
    int *ids;      // (cap_b) the utterances' indices as labels
    // the last forward
    const head_comm_t *comm;  // NULL: this rank's batch alone
    int G, B, off, grad;      // the contrastive batch, this rank's samples, its first row there; a gradient kept
    int cap_g, cap_b;
    int64_t *counts;    // (ranks) every rank's samples
    float *own, *all;   // (B, E) this rank's embeddings (later their gradient), (G, E) everyone's
    float *z, *norm;    // (G, E) unit rows, (G) their norms
    float *dz, *rows;   // (G, E) the gradient w.r.t. z, (G) the anchors' losses
    int *labels, *hit;  // (G)
    float *d_grad;      // (B, E) on the backend
    float *d_all;       // (G, E) on the backend: the device collectives' buffer
    int device;         // the last forward's collectives ran on the device (equal counts, NCCL)
};

static const struct {
    const char *name;
    contrastive_kind_t kind;
    int aam;
} losses[] = {
    {"aam", CONTRASTIVE_NONE, 1},      {"supcon", CONTRASTIVE_SUPCON, 0},     {"angleproto", CONTRASTIVE_PROTO, 0},
    {"ge2e", CONTRASTIVE_GE2E, 0},     {"aam+supcon", CONTRASTIVE_SUPCON, 1}, {"aam+angleproto", CONTRASTIVE_PROTO, 1},
    {"aam+ge2e", CONTRASTIVE_GE2E, 1}, {"dino", CONTRASTIVE_NONE, 0},  // (app/model/layers/dino.h)
};

contrastive_head_t *contrastive_head_create(const model_config_t *cfg, int *aam) {
    for (size_t i = 0; i < sizeof losses / sizeof losses[0]; i++) {
        if (strcmp(cfg->loss, losses[i].name) != 0) continue;
        *aam = losses[i].aam;
        if (losses[i].kind == CONTRASTIVE_NONE) return NULL;
        contrastive_head_t *h = callocCheck(1, sizeof *h);
        h->kind = losses[i].kind;
        h->scale = (float)cfg->contrastive_scale;
        h->weight = losses[i].aam ? (float)cfg->contrastive_weight : 1.0f;
        h->M = (int)cfg->per_speaker;
        h->local = cfg->local_negatives;
        h->instance = cfg->instance_labels;
        return h;
    }
    spk_die(SPK_EXIT_USAGE, "unknown --loss '%s' (aam, supcon, angleproto, ge2e, aam+ one of those, or dino)",
            cfg->loss);
}

static void release(contrastive_head_t *h, const model_t *m) {
    void *host[] = {h->own, h->all, h->z, h->norm, h->dz, h->rows, h->labels, h->hit, h->ids};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
    h->own = h->all = h->z = h->norm = h->dz = h->rows = NULL;
    h->labels = h->hit = h->ids = NULL;
    model_buf_free(m, &h->d_grad);
    model_buf_free(m, &h->d_all);
    h->cap_g = h->cap_b = 0;
}

void contrastive_head_free(contrastive_head_t *h, const model_t *m) {
    if (!h) return;
    release(h, m);
    free(h->counts);
    free(h);
}

static void reserve(contrastive_head_t *h, const model_t *m, int G, int B, int E) {
    if (G <= h->cap_g && B <= h->cap_b) return;
    release(h, m);
    const size_t g = (size_t)G, e = (size_t)E;
    h->own = mallocCheck((size_t)B * e * sizeof(float));
    h->all = mallocCheck(g * e * sizeof(float));
    h->z = mallocCheck(g * e * sizeof(float));
    h->dz = mallocCheck(g * e * sizeof(float));
    h->norm = mallocCheck(g * sizeof(float));
    h->rows = mallocCheck(g * sizeof(float));
    h->labels = mallocCheck(g * sizeof(int));
    h->hit = mallocCheck(g * sizeof(int));
    h->ids = mallocCheck((size_t)B * sizeof(int));
    h->d_grad = model_buf(m, (size_t)B * e);
    if (m->batch_comm && m->batch_comm->allgather_device) h->d_all = model_buf(m, g * e);
    h->cap_g = G;
    h->cap_b = B;
}

// angleproto and ge2e read the batch as groups of M rows of one speaker, which only the
// speaker-balanced sampler makes.
static void check_groups(const contrastive_head_t *h) {
    const int M = h->M;
    int whole = h->G % M == 0 && h->B % M == 0 && h->off % M == 0;
    for (int g = 0; whole && g < h->G; g++) whole = h->labels[g] == h->labels[g - g % M];
    if (!whole)
        spk_die(SPK_EXIT_USAGE,
                "--loss %s needs batches of whole groups of %d utterances of one speaker on every rank "
                "(--sampler balanced, with a per-rank batch that --utts-per-speaker divides)",
                h->kind == CONTRASTIVE_PROTO ? "angleproto" : "ge2e", M);
}

void contrastive_head_forward(contrastive_head_t *h, model_t *m, const float *emb, const int *labels,
                              const int64_t *index, int B, int E, int train, double *loss, float *row_loss, int *hits) {
    const head_comm_t *c = train && !h->local ? m->batch_comm : NULL;
    // evaluation batches are not made of speaker groups: they get the supervised contrastive loss
    const contrastive_kind_t kind = train ? h->kind : CONTRASTIVE_SUPCON;
    int64_t G = B, off = 0;
    if (c) {
        if (!h->counts) h->counts = mallocCheck((size_t)c->size * sizeof(int64_t));
        c->counts(c->ctx, B, h->counts);
        G = 0;
        for (int r = 0; r < c->size; r++) {
            if (r == c->rank) off = G;
            G += h->counts[r];
        }
    }
    SPK_ASSERT(G >= B && G < (1 << 30));
    reserve(h, m, (int)G, B > 0 ? B : 1, E);
    h->comm = c;
    h->G = (int)G, h->B = B, h->off = (int)off, h->grad = 0;
    if (train && h->instance) {  // each utterance its own class: its views are its only positives
        for (int i = 0; i < B; i++) {
            SPK_ASSERT(index[i] >= 0 && index[i] <= INT32_MAX);
            h->ids[i] = (int)index[i];
        }
        labels = h->ids;
    }
    h->device = c && head_comm_on_device(c, h->counts);
    if (h->device && !h->d_all) h->d_all = model_buf(m, (size_t)h->cap_g * E);
    if (h->device) {  // the embeddings gathered where they are, then the whole batch down
        c->allgather_device(c->ctx, emb, h->d_all, (int64_t)B * E);
        m->be->download(h->all, h->d_all, (size_t)G * E * sizeof(float));
    } else if (B > 0) {
        m->be->download(h->own, emb, (size_t)B * E * sizeof(float));
    }
    if (c) {
        if (!h->device) c->allgather(c->ctx, h->own, h->all, h->counts, (size_t)E * sizeof(float));
        c->allgather(c->ctx, labels, h->labels, h->counts, sizeof(int));
    } else {
        memcpy(h->all, h->own, (size_t)B * E * sizeof(float));
        memcpy(h->labels, labels, (size_t)B * sizeof(int));
    }
    *loss = 0.0;
    *hits = 0;
    if (row_loss)
        for (int i = 0; i < B; i++) row_loss[i] = 0.0f;
    if (G < 2) return;  // no pair to contrast
    if (kind != CONTRASTIVE_SUPCON) check_groups(h);
    // The anchors: this rank's, or in the invariant mode all of them (the same bits on every rank).
    const int a0 = m->invariant ? 0 : (int)off, n = m->invariant ? (int)G : B;
    const int anchors = kind == CONTRASTIVE_PROTO ? (int)G / h->M : (int)G;  // the loss is their mean
    const double share = (double)G / ((double)(B > 0 ? B : 1) * anchors);
    const float grad_scale = (float)(h->weight * (m->invariant ? 1.0 / anchors : share));
    contrastive_normalize(h->all, h->z, h->norm, (int)G, E);
    if (train) memset(h->dz, 0, (size_t)G * E * sizeof(float));
    contrastive_rows(kind, h->z, h->labels, (int)G, E, h->M, a0, n, h->scale, h->rows, train ? h->dz : NULL, grad_scale,
                     h->hit, m->invariant);
    double sum = 0.0;
    for (int i = 0; i < B; i++) {
        const int r = (int)off + i - a0;
        sum += h->rows[r];
        *hits += h->hit[r];
        if (row_loss) row_loss[i] = (float)((double)h->weight * h->rows[r] * (double)G / anchors);
    }
    *loss = h->weight * sum * share;
    h->grad = train;
}

void contrastive_head_backward(contrastive_head_t *h, model_t *m, float *g_emb) {
    SPK_ASSERT(h->grad && h->B > 0);
    h->grad = 0;
    if (h->G < 2) return;
    const int G = h->G, B = h->B, E = (int)m->emb_dim;
    contrastive_normalize_backward(h->z, h->norm, h->dz, h->all, G, E);  // d loss / d embeddings, every row
    if (h->comm && !m->invariant && h->device) {  // every rank's part of this rank's rows, summed on the device
        m->be->upload(h->d_all, h->all, (size_t)G * E * sizeof(float));
        h->comm->reduce_scatter_device(h->comm->ctx, h->d_all, h->d_grad, (int64_t)B * E);
    } else {
        if (h->comm && !m->invariant)  // every rank's part of the gradient of this rank's rows
            h->comm->reduce_scatter(h->comm->ctx, h->all, h->own, h->counts, (size_t)E);
        else  // every anchor was computed here (or there is no other rank)
            memcpy(h->own, h->all + (size_t)h->off * E, (size_t)B * E * sizeof(float));
        m->be->upload(h->d_grad, h->own, (size_t)B * E * sizeof(float));
    }
    m->be->vec_acc(g_emb, h->d_grad, (size_t)B * E);
}
