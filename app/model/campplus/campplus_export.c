// CAM++ in its toolkit's terms (app/model/campplus/campplus_export.h).
#include "app/model/campplus/campplus_export.h"

#include "app/model/campplus/campplus.h"
#include "app/model/layers/onnx_conv2d.h"
#include "kernels/base/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ONNX_OPSET 17

int campplus_speakerlab_args(const model_t *m, char *args, size_t cap) {
    const campplus_t *c = m->impl;
    const campp_dims_t *d = &c->d;
    snprintf(args, cap,
             "{\"feat_dim\": %lld, \"embedding_size\": %lld, \"growth_rate\": %d, \"bn_size\": %d, "
             "\"init_channels\": %lld}",
             (long long)d->feat, (long long)d->emb, d->growth, d->bn_size, (long long)d->channels);
    return 0;
}

// ---- the graph (NCT, as 3D-Speaker's forward) ------------------------------------------------------

// A 1-D convolution over (B, C, T) with the weight at w (and the bias at b, or none: b < 0).
static const char *conv1d(onnx_graph_t *g, const char *out, const char *x, int64_t w, int64_t b, int k, int dilation) {
    const char *in[3] = {x, onnx_param(g, w), b >= 0 ? onnx_param(g, b) : NULL};
    const char *y = onnx_node(g->b, "Conv", out, b >= 0 ? 3 : 2, in);
    onnx_attr_ints(g->b, "kernel_shape", 1, (int64_t[]){k});
    onnx_attr_ints(g->b, "pads", 2, (int64_t[]){dilation * (k - 1) / 2, dilation * (k - 1) / 2});
    onnx_attr_ints(g->b, "dilations", 1, (int64_t[]){dilation});
    return y;
}

// relu(BatchNorm(x)) with the tensors from w on (weight, bias, running mean and variance).
static const char *bn_relu(onnx_graph_t *g, const char *prefix, const char *x, int64_t w, int64_t b, int64_t mean,
                           int64_t var) {
    char p[PARAM_NAME_MAX];
    snprintf(p, sizeof p, "%s", prefix);
    return onnx_op1(g, "Relu", onnx_nm(p, "relu"), onnx_batchnorm(g, onnx_nm(p, "out"), x, w, b, mean, var));
}

// The CAM layer's context: the mean over time plus each frame's 100-frame segment mean
// (AveragePool with ceil_mode, the last segment over its own frames), (B, C, T).
static const char *context(onnx_graph_t *g, const char *p, const char *h) {
    const char *seg = onnx_op1(g, "AveragePool", onnx_nm(p, "seg"), h);
    onnx_attr_ints(g->b, "kernel_shape", 1, (int64_t[]){CAMPP_SEG});
    onnx_attr_ints(g->b, "strides", 1, (int64_t[]){CAMPP_SEG});
    onnx_attr_int(g->b, "ceil_mode", 1);
    const char *axes = onnx_const_i64(g->b, onnx_nm(p, "seg_axes"), 1, (int64_t[]){1}, (int64_t[]){3});
    seg = onnx_node(g->b, "Unsqueeze", onnx_nm(p, "seg4"), 2, (const char *[]){seg, axes});
    const char *reps = onnx_const_i64(g->b, onnx_nm(p, "seg_reps"), 1, (int64_t[]){4}, (int64_t[]){1, 1, 1, CAMPP_SEG});
    seg = onnx_node(g->b, "Tile", onnx_nm(p, "seg_tiled"), 2, (const char *[]){seg, reps});
    const char *flat = onnx_const_i64(g->b, onnx_nm(p, "seg_shape"), 1, (int64_t[]){3}, (int64_t[]){0, 0, -1});
    seg = onnx_node(g->b, "Reshape", onnx_nm(p, "seg_frames"), 2, (const char *[]){seg, flat});
    const char *shape = onnx_op1(g, "Shape", onnx_nm(p, "shape"), h);
    const char *t =
        onnx_node(g->b, "Slice", onnx_nm(p, "t"), 3,
                  (const char *[]){shape, onnx_const_i64(g->b, onnx_nm(p, "t0"), 1, (int64_t[]){1}, (int64_t[]){2}),
                                   onnx_const_i64(g->b, onnx_nm(p, "t1"), 1, (int64_t[]){1}, (int64_t[]){3})});
    const char *zero = onnx_const_i64(g->b, onnx_nm(p, "crop0"), 1, (int64_t[]){1}, (int64_t[]){0});
    const char *axis = onnx_const_i64(g->b, onnx_nm(p, "crop_axis"), 1, (int64_t[]){1}, (int64_t[]){2});
    seg = onnx_node(g->b, "Slice", onnx_nm(p, "seg_cropped"), 4, (const char *[]){seg, zero, t, axis});
    return onnx_op2(g, "Add", onnx_nm(p, "context"), onnx_reduce_mean(g, onnx_nm(p, "mean"), h, 2), seg);
}

static const char *cam_layer(onnx_graph_t *g, const dense_block_t *k, const cam_layer_t *l, const char *x) {
    char p[PARAM_NAME_MAX];
    onnx_prefix_of(g, l->bn1_w, strlen(".nonlinear1.batchnorm.weight"), p, sizeof p);
    const char *z = bn_relu(g, onnx_nm(p, "nonlinear1"), x, l->bn1_w, l->bn1_b, l->bn1_mean, l->bn1_var);
    const char *h = onnx_conv2d_bn(g, &l->lin, z, 1);
    const char *y = conv1d(g, onnx_nm(p, "local"), h, l->local_w, -1, 3, k->dilation);
    const char *q = conv1d(g, onnx_nm(p, "cam1"), context(g, p, h), l->l1_w, l->l1_b, 1, 1);
    q = onnx_op1(g, "Relu", onnx_nm(p, "cam_relu"), q);
    const char *mask =
        onnx_op1(g, "Sigmoid", onnx_nm(p, "mask"), conv1d(g, onnx_nm(p, "cam2"), q, l->l2_w, l->l2_b, 1, 1));
    const char *out = onnx_op2(g, "Mul", onnx_nm(p, "out"), y, mask);
    return onnx_concat(g, onnx_nm(p, "concat"), 2, (const char *[]){x, out});
}

static const char *dense_block(onnx_graph_t *g, const dense_block_t *k, int index, const char *x) {
    for (int i = 0; i < k->n; i++) x = cam_layer(g, k, &k->layer[i], x);
    char p[32];
    snprintf(p, sizeof p, "xvector.transit%d", index);
    x = bn_relu(g, p, x, k->tr_bn_w, k->tr_bn_b, k->tr_bn_mean, k->tr_bn_var);
    return conv1d(g, onnx_nm(p, "linear"), x, k->tr_w, -1, 1, 1);
}

static void build(onnx_graph_t *g, const campplus_t *c) {
    const campp_dims_t *d = &c->d;
    const char *x = onnx_node(g->b, "Unsqueeze", "input.image", 2,
                              (const char *[]){onnx_fbank_input(g, d->feat),
                                               onnx_const_i64(g->b, "input.axes", 1, (int64_t[]){1}, (int64_t[]){1})});
    const char *h = onnx_conv2d_bn(g, &c->stem, x, 1);
    for (int i = 0; i < 2 * CAMPP_FCM_BLOCKS; i++) h = onnx_res_block(g, &c->fcm[i], h);
    h = onnx_conv2d_bn(g, &c->fcm_out, h, 1);
    // (B, 32, F/8, T) -> (B, 32 F/8, T)
    const char *shape =
        onnx_const_i64(g->b, "head.flat_shape", 1, (int64_t[]){3}, (int64_t[]){0, CAMPP_FCM * (d->feat / 8), -1});
    h = onnx_node(g->b, "Reshape", "head.out", 2, (const char *[]){h, shape});
    h = onnx_conv2d_bn(g, &c->tdnn, h, 1);
    for (int i = 0; i < CAMPP_BLOCKS; i++) h = dense_block(g, &c->blocks[i], i + 1, h);
    h = bn_relu(g, "xvector.out_nonlinear", h, c->out_bn_w, c->out_bn_b, c->out_bn_mean, c->out_bn_var);
    const char *stats = onnx_stats_pool(g, "xvector.stats", h, 2, 0.0f);  // (B, 2C): mean, unbiased std
    const char *axes = onnx_const_i64(g->b, "xvector.dense.axes", 1, (int64_t[]){1}, (int64_t[]){2});
    stats = onnx_node(g->b, "Unsqueeze", "xvector.dense.in", 2, (const char *[]){stats, axes});
    const char *y = conv1d(g, "xvector.dense.linear.out", stats, c->dense_w, -1, 1, 1);
    const int64_t E = d->emb;
    float *ones = malloc((size_t)E * sizeof(float)), *zeros = calloc((size_t)E, sizeof(float));
    for (int64_t i = 0; i < E; i++) ones[i] = 1.0f;
    y = onnx_node(g->b, "BatchNormalization", "xvector.dense.out", 5,
                  (const char *[]){y, onnx_const_f32(g->b, "xvector.dense.scale", 1, &E, ones),
                                   onnx_const_f32(g->b, "xvector.dense.shift", 1, &E, zeros),
                                   onnx_state(g, c->dense_mean), onnx_state(g, c->dense_var)});
    onnx_attr_float(g->b, "epsilon", 1e-5f);
    free(ones);
    free(zeros);
    onnx_node(g->b, "Squeeze", "embedding", 2, (const char *[]){y, axes});
    onnx_graph_output(g->b, "embedding", 2, (const char *[]){"batch", NULL}, (int64_t[]){0, E});
}

int campplus_onnx_write(const model_t *m, const char *path, const st_meta_t *meta, int n, char *err, size_t cap) {
    onnx_graph_t g = {onnx_builder_new("campplus", ONNX_OPSET), m};
    for (int i = 0; i < n; i++) onnx_metadata(g.b, meta[i].key, meta[i].value);
    build(&g, m->impl);
    const int rc = onnx_builder_write(g.b, path, err, cap) ? SPK_EXIT_FAILURE : 0;
    onnx_builder_free(g.b);
    return rc;
}
