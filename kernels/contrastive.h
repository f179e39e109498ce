// Metric-learning losses over a batch of L2-normalised embeddings, in host memory: what the
// contrastive head (app/model/layers/contrastive_head.h) computes for its anchors among the
// global batch. Every loss is a cross-entropy over scaled cosine similarities (the scale is a
// temperature's inverse; a bias would cancel in the softmax):
//   supcon  supervised contrastive (Khosla et al. 2020, L_out): anchor a against every other row
//           k != a, its positives P(a) the other rows of its speaker:
//           loss_a = log sum_{k != a} exp(s_ak) - mean_{p in P(a)} s_ap, s = scale cos;
//           0 for an anchor without positives (it is still every other anchor's negative).
//   proto   angular prototypical (Chung et al. 2020, voxceleb_trainer's AngleProto): rows come in
//           groups of M of one speaker; a group's first row is its query, the sum of the other
//           M - 1 its prototype; the query's loss is the cross-entropy of scale cos(query, every
//           prototype) with its own group; the other rows carry no loss of their own.
//   ge2e    generalised end-to-end, softmax form (Wan et al. 2018): every row against every
//           group's centroid, its own group's without itself; cross-entropy with its own group.
// Prototypes and centroids are of the unit-norm rows (the GE2E paper's; voxceleb_trainer averages
// its raw embeddings instead). supcon's cosines and gradients are GEMMs (kernels/gemm.h); with
// `fixed` they are spk_sgemm_fixed's, whose results depend only on the operands and shapes, and
// every other sum runs in a fixed order, so ranks that compute the same anchors of the same
// batch agree bitwise whatever their threads.
#pragma once

typedef enum {
    CONTRASTIVE_NONE = 0,
    CONTRASTIVE_SUPCON = 1,
    CONTRASTIVE_PROTO = 2,
    CONTRASTIVE_GE2E = 3,
} contrastive_kind_t;

// Losses of the anchors [a0, a0 + n) among G rows z (G, E) of unit norm with labels (G); for
// proto and ge2e, groups of M consecutive rows (M >= 2, G a multiple of M, a0 and n too).
// row_loss (n): each anchor's loss (0 for proto's non-query rows). dz (G, E), when not NULL:
// adds grad_scale * d(sum of the anchors' losses) / dz (directions along each row included: the
// caller projects them out with the normalisation's backward). row_hit (n, may be NULL): 1 where
// the anchor's best match is its own speaker (supcon: the nearest other row; proto and ge2e: the
// highest prototype or centroid is its own; proto's other rows repeat their query's).
void contrastive_rows(contrastive_kind_t kind, const float *z, const int *labels, int G, int E, int M, int a0, int n,
                      float scale, float *row_loss, float *dz, float grad_scale, int *row_hit, int fixed);

// Rows x (B, E) to unit norm: z = x / max(|x|, 1e-12), norm (B) keeps |x|.
void contrastive_normalize(const float *x, float *z, float *norm, int B, int E);
// The normalisation's backward: dx = (dz - z (z . dz)) / max(|x|, 1e-12), in place of dz allowed.
void contrastive_normalize_backward(const float *z, const float *norm, const float *dz, float *dx, int B, int E);
