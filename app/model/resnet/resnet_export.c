// WeSpeaker's ResNets in their toolkit's terms (app/model/resnet/resnet_export.h).
#include "app/model/resnet/resnet_export.h"

#include "app/model/layers/onnx_graph.h"
#include "app/model/resnet/resnet.h"
#include "kernels/base/check.h"

#include <stdio.h>
#include <string.h>

#define ONNX_OPSET 17
#define TSTP_EPS   1e-7f

int resnet_wespeaker_args(const model_t *m, char *args, size_t cap) {
    const resnet_t *r = m->impl;
    snprintf(args, cap,
             "{\"feat_dim\": %lld, \"embed_dim\": %lld, \"pooling_func\": \"TSTP\", \"two_emb_layer\": false, "
             "\"m_channels\": %lld}",
             (long long)r->feat, (long long)r->emb, (long long)r->m_channels);
    return 0;
}

// ---- the graph (NCHW, as WeSpeaker's forward) -----------------------------------------------------

// Conv2d (no bias, padding k / 2) and its BatchNorm, then a ReLU when relu is set.
static const char *unit(onnx_graph_t *g, const conv2d_bn_t *u, const char *x, int relu) {
    char p[PARAM_NAME_MAX];
    onnx_prefix_of(g, u->w, strlen(".weight"), p, sizeof p);
    const conv2d_geom_t q = u->g;
    const char *y = onnx_node(g->b, "Conv", onnx_nm(p, "out"), 2, (const char *[]){x, onnx_param(g, u->w)});
    onnx_attr_ints(g->b, "kernel_shape", 2, (int64_t[]){q.kh, q.kw});
    onnx_attr_ints(g->b, "strides", 2, (int64_t[]){q.sh, q.sw});
    onnx_attr_ints(g->b, "pads", 4, (int64_t[]){q.ph, q.pw, q.ph, q.pw});
    onnx_attr_ints(g->b, "dilations", 2, (int64_t[]){q.dh, q.dw});
    onnx_prefix_of(g, u->bn_w, strlen(".weight"), p, sizeof p);
    y = onnx_batchnorm(g, onnx_nm(p, "out"), y, u->bn_w, u->bn_b, u->bn_mean, u->bn_var);
    return relu ? onnx_op1(g, "Relu", onnx_nm(p, "relu"), y) : y;
}

static const char *block(onnx_graph_t *g, const res_block_t *b, const char *x) {
    const char *y = x;
    for (int k = 0; k < b->n - 1; k++) y = unit(g, &b->u[k], y, 1);
    y = unit(g, &b->u[b->n - 1], y, 0);
    const char *res = b->has_sc ? unit(g, &b->sc, x, 0) : x;
    char p[PARAM_NAME_MAX];
    onnx_prefix_of(g, b->u[0].w, strlen(".conv1.weight"), p, sizeof p);
    return onnx_op1(g, "Relu", onnx_nm(p, "out"), onnx_op2(g, "Add", onnx_nm(p, "sum"), y, res));
}

// WeSpeaker's TSTP: the mean and sqrt(unbiased variance + 1e-7) over time (axis 3) of (B, C, H,
// T), each flattened to (B, C*H), concatenated.
static const char *tstp(onnx_graph_t *g, const char *h) {
    const char *mean = onnx_reduce_mean(g, "pool.mean", h, 3);
    const char *d = onnx_op2(g, "Sub", "pool.dev", h, mean);
    const char *d2 = onnx_op2(g, "Mul", "pool.dev2", d, d);
    const char *axes = onnx_const_i64(g->b, "pool.axes", 1, (int64_t[]){1}, (int64_t[]){3});
    const char *ss = onnx_node(g->b, "ReduceSum", "pool.ss", 2, (const char *[]){d2, axes});
    // T - 1, from the map's shape
    const char *shape = onnx_op1(g, "Shape", "pool.shape", h);
    const char *t = onnx_node(g->b, "Gather", "pool.t", 2,
                              (const char *[]){shape, onnx_const_i64(g->b, "pool.t_axis", 0, NULL, (int64_t[]){3})});
    t = onnx_op1(g, "Cast", "pool.t_float", t);
    onnx_attr_int(g->b, "to", 1);  // FLOAT
    const char *one = onnx_const_f32(g->b, "pool.one", 0, NULL, (float[]){1.0f});
    const char *var = onnx_op2(g, "Div", "pool.var", ss, onnx_op2(g, "Sub", "pool.t_minus_1", t, one));
    const char *eps = onnx_const_f32(g->b, "pool.eps", 0, NULL, (float[]){TSTP_EPS});
    const char *sd = onnx_op1(g, "Sqrt", "pool.std", onnx_op2(g, "Add", "pool.var_eps", var, eps));
    const char *flat[2], *const names[2] = {"pool.mean_flat", "pool.std_flat"}, *const src[2] = {mean, sd};
    for (int i = 0; i < 2; i++) {
        flat[i] = onnx_op1(g, "Flatten", names[i], src[i]);  // (B, C, H, 1) -> (B, C*H)
        onnx_attr_int(g->b, "axis", 1);
    }
    return onnx_concat(g, "pool.out", 2, flat);
}

static void build(onnx_graph_t *g, const resnet_t *r) {
    onnx_graph_input(g->b, "fbank", 3, (const char *[]){"batch", "frames", NULL}, (int64_t[]){0, 0, r->feat});
    // The loader's per-utterance mean normalisation, then (B, T, F) -> (B, 1, F, T).
    const char *x = onnx_reduce_mean(g, "cmn.mean", "fbank", 1);
    x = onnx_op2(g, "Sub", "cmn.out", "fbank", x);
    x = onnx_op1(g, "Transpose", "input.transposed", x);
    onnx_attr_ints(g->b, "perm", 3, (int64_t[]){0, 2, 1});
    x = onnx_node(g->b, "Unsqueeze", "input.image", 2,
                  (const char *[]){x, onnx_const_i64(g->b, "input.axes", 1, (int64_t[]){1}, (int64_t[]){1})});
    const char *h = unit(g, &r->stem, x, 1);
    for (int i = 0; i < r->nblocks; i++) h = block(g, &r->block[i], h);
    onnx_node(g->b, "Gemm", "embedding", 3,
              (const char *[]){tstp(g, h), onnx_param(g, r->seg_w), onnx_param(g, r->seg_b)});
    onnx_attr_int(g->b, "transB", 1);  // seg_1: y = x W^T + b
    onnx_graph_output(g->b, "embedding", 2, (const char *[]){"batch", NULL}, (int64_t[]){0, r->emb});
}

int resnet_onnx_write(const model_t *m, const char *path, const st_meta_t *meta, int n, char *err, size_t cap) {
    onnx_graph_t g = {onnx_builder_new("wespeaker_resnet", ONNX_OPSET), m};
    for (int i = 0; i < n; i++) onnx_metadata(g.b, meta[i].key, meta[i].value);
    build(&g, m->impl);
    const int rc = onnx_builder_write(g.b, path, err, cap) ? SPK_EXIT_FAILURE : 0;
    onnx_builder_free(g.b);
    return rc;
}
