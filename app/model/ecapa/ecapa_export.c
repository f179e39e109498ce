// ECAPA-TDNN in other toolkits' terms: SpeechBrain's constructor arguments, and the encoder
// as an ONNX graph that mirrors SpeechBrain's ECAPA_TDNN.forward node for node. Initializers
// carry the SpeechBrain state-dict names of the tensors they hold.
#include "app/model/ecapa/ecapa_export.h"

#include "app/model/ecapa/ecapa.h"
#include "app/model/layers/onnx_graph.h"
#include "kernels/base/check.h"

#include <stdio.h>
#include <string.h>

#define ONNX_OPSET 17
#define STATS_EPS  1e-12f  // SpeechBrain's AttentiveStatisticsPooling eps (ecapa_asp.c uses the same)

int ecapa_speechbrain_args(const model_t *m, char *encoder, size_t encoder_cap, char *classifier,
                           size_t classifier_cap) {
    const ecapa_t *e = m->impl;
    if (e->has_visual) return -1;
    const seres_t *b = e->blocks;
    const long long C = e->d.channels;
    snprintf(
        encoder, encoder_cap,
        "{\"input_size\": %lld, \"channels\": [%lld, %lld, %lld, %lld, %lld], \"kernel_sizes\": [%d, %d, %d, %d, %d], "
        "\"dilations\": [%d, %d, %d, %d, %d], \"attention_channels\": %lld, \"res2net_scale\": %d, \"se_channels\": "
        "%lld, "
        "\"global_context\": true, \"lin_neurons\": %lld}",
        (long long)e->d.feat, C, C, C, C, (long long)e->mfa.cout, e->block0.k, b[0].res[0].k, b[1].res[0].k,
        b[2].res[0].k, e->mfa.k, e->block0.dil, b[0].res[0].dil, b[1].res[0].dil, b[2].res[0].dil, e->mfa.dil,
        (long long)e->d.att, ECAPA_SCALE, (long long)e->d.se, (long long)e->d.emb);
    snprintf(classifier, classifier_cap, "{\"input_size\": %lld, \"lin_blocks\": 0, \"out_neurons\": %lld}",
             (long long)e->d.emb, (long long)e->d.classes);
    return 0;
}

// ---- the graph ----------------------------------------------------------------------------

// Conv1d with SpeechBrain's "same" reflect padding: Pad (reflect) + Conv with dilation.
static const char *conv(onnx_graph_t *g, const char *name, const char *x, int64_t w, int64_t b, int k, int dil) {
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%.250s", name);
    if (k > 1) {
        const int64_t p = (int64_t)dil * (k - 1) / 2;
        const char *pads =
            onnx_const_i64(g->b, onnx_nm(prefix, "pads"), 1, (int64_t[]){6}, (int64_t[]){0, 0, p, 0, 0, p});
        x = onnx_op2(g, "Pad", onnx_nm(prefix, "padded"), x, pads);
        onnx_attr_string(g->b, "mode", "reflect");
    }
    const char *out =
        onnx_node(g->b, "Conv", onnx_nm(prefix, "out"), 3, (const char *[]){x, onnx_param(g, w), onnx_param(g, b)});
    onnx_attr_ints(g->b, "kernel_shape", 1, (int64_t[]){k});
    onnx_attr_ints(g->b, "dilations", 1, (int64_t[]){dil});
    return out;
}

// TDNNBlock: conv -> ReLU -> BatchNorm.
static const char *tdnn(onnx_graph_t *g, const tdnn_t *l, const char *x) {
    char p[PARAM_NAME_MAX];
    onnx_prefix_of(g, l->w, strlen(".conv.conv.weight"), p, sizeof p);
    const char *y = conv(g, onnx_nm(p, "conv"), x, l->w, l->b, l->k, l->dil);
    y = onnx_op1(g, "Relu", onnx_nm(p, "relu"), y);
    return onnx_batchnorm(g, onnx_nm(p, "norm"), y, l->bn_w, l->bn_b, l->run_mean, l->run_var);
}

// SERes2NetBlock: TDNN 1x1 -> Res2Net -> TDNN 1x1 -> squeeze-excitation -> + input.
static const char *seres(onnx_graph_t *g, const seres_t *s, int C, const char *x) {
    char p[PARAM_NAME_MAX], chunk[ECAPA_SCALE][PARAM_NAME_MAX + 32];
    onnx_prefix_of(g, s->se1_w, strlen(".se_block.conv1.conv.weight"), p, sizeof p);
    const char *t1 = tdnn(g, &s->tdnn1, x);
    const char *outs[ECAPA_SCALE], *ys[ECAPA_SCALE];
    int64_t split[ECAPA_SCALE];
    for (int i = 0; i < ECAPA_SCALE; i++) {
        snprintf(chunk[i], sizeof chunk[i], "%.60s.res2net_block.chunk%d", p, i);
        outs[i] = chunk[i];
        split[i] = C / ECAPA_SCALE;
    }
    const char *sizes = onnx_const_i64(g->b, onnx_nm(p, "res2net_block.split"), 1, (int64_t[]){ECAPA_SCALE}, split);
    onnx_node_n(g->b, "Split", 2, (const char *[]){t1, sizes}, ECAPA_SCALE, outs);
    onnx_attr_int(g->b, "axis", 1);
    ys[0] = chunk[0];
    for (int i = 1; i < ECAPA_SCALE; i++) {
        char in[PARAM_NAME_MAX + 32];
        snprintf(in, sizeof in, "%.60s.res2net_block.in%d", p, i);
        ys[i] = tdnn(g, &s->res[i - 1], i == 1 ? chunk[1] : onnx_op2(g, "Add", in, chunk[i], ys[i - 1]));
    }
    const char *t2 = tdnn(g, &s->tdnn2, onnx_concat(g, onnx_nm(p, "res2net_block.out"), ECAPA_SCALE, ys));
    const char *z = onnx_reduce_mean(g, onnx_nm(p, "se_block.mean"), t2, 2);
    z = conv(g, onnx_nm(p, "se_block.conv1"), z, s->se1_w, s->se1_b, 1, 1);
    z = onnx_op1(g, "Relu", onnx_nm(p, "se_block.relu"), z);
    z = conv(g, onnx_nm(p, "se_block.conv2"), z, s->se2_w, s->se2_b, 1, 1);
    z = onnx_op1(g, "Sigmoid", onnx_nm(p, "se_block.sigmoid"), z);
    z = onnx_op2(g, "Mul", onnx_nm(p, "se_block.out"), t2, z);
    return onnx_op2(g, "Add", onnx_nm(p, "out"), z, x);
}

// Weighted mean and standard deviation over time of h (B, C, T) with weights w (B, 1|C, T)
// summing to 1 in time (NULL: uniform): SpeechBrain's _compute_statistics; [mean | std] as
// (B, 2C, 1), or the mean with the std in *std_out when std_out is not NULL.
static const char *stats(onnx_graph_t *g, const char *name, const char *h, const char *w, const char **std_out) {
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%.250s", name);
    const char *eps = onnx_const_f32(g->b, onnx_nm(prefix, "eps"), 0, NULL, (float[]){STATS_EPS});
    const char *axes = w ? onnx_const_i64(g->b, onnx_nm(prefix, "axes"), 1, (int64_t[]){1}, (int64_t[]){2}) : NULL;
    const char *mean, *var;
    if (w) {
        mean = onnx_node(g->b, "ReduceSum", onnx_nm(prefix, "mean"), 2,
                         (const char *[]){onnx_op2(g, "Mul", onnx_nm(prefix, "wh"), w, h), axes});
    } else {
        mean = onnx_reduce_mean(g, onnx_nm(prefix, "mean"), h, 2);
    }
    const char *d = onnx_op2(g, "Sub", onnx_nm(prefix, "dev"), h, mean);
    const char *d2 = onnx_op2(g, "Mul", onnx_nm(prefix, "dev2"), d, d);
    if (w)
        var = onnx_node(g->b, "ReduceSum", onnx_nm(prefix, "var"), 2,
                        (const char *[]){onnx_op2(g, "Mul", onnx_nm(prefix, "wdev2"), w, d2), axes});
    else
        var = onnx_reduce_mean(g, onnx_nm(prefix, "var"), d2, 2);
    const char *sd =
        onnx_op1(g, "Sqrt", onnx_nm(prefix, "std"), onnx_op2(g, "Max", onnx_nm(prefix, "var_floor"), var, eps));
    if (std_out) {
        *std_out = sd;
        return mean;
    }
    return onnx_concat(g, onnx_nm(prefix, "pooled"), 2, (const char *[]){mean, sd});
}

// AttentiveStatisticsPooling with global context: attention from [h, mean, std] over time.
static const char *asp(onnx_graph_t *g, const asp_t *a, const char *h) {
    char p[PARAM_NAME_MAX];
    onnx_prefix_of(g, a->conv_w, strlen(".conv.conv.weight"), p, sizeof p);
    const char *sd, *mean = stats(g, onnx_nm(p, "global"), h, NULL, &sd);
    const char *shape = onnx_op1(g, "Shape", onnx_nm(p, "shape"), h);
    const char *ctx[3] = {h, onnx_op2(g, "Expand", onnx_nm(p, "mean_t"), mean, shape),
                          onnx_op2(g, "Expand", onnx_nm(p, "std_t"), sd, shape)};
    const char *att = tdnn(g, &a->tdnn, onnx_concat(g, onnx_nm(p, "context"), 3, ctx));
    att = onnx_op1(g, "Tanh", onnx_nm(p, "tanh"), att);
    att = conv(g, onnx_nm(p, "conv"), att, a->conv_w, a->conv_b, 1, 1);
    att = onnx_op1(g, "Softmax", onnx_nm(p, "attention"), att);
    onnx_attr_int(g->b, "axis", 2);
    return stats(g, onnx_nm(p, "weighted"), h, att, NULL);
}

static void build(onnx_graph_t *g, const ecapa_t *e) {
    const int64_t F = e->d.feat, E = e->d.emb;
    onnx_graph_input(g->b, "fbank", 3, (const char *[]){"batch", "frames", NULL}, (int64_t[]){0, 0, F});
    // The loader's per-utterance mean normalisation, then (B, T, F) -> (B, F, T).
    const char *x = onnx_reduce_mean(g, "cmn.mean", "fbank", 1);
    x = onnx_op2(g, "Sub", "cmn.out", "fbank", x);
    x = onnx_op1(g, "Transpose", "input.transposed", x);
    onnx_attr_ints(g->b, "perm", 3, (int64_t[]){0, 2, 1});
    const char *h = tdnn(g, &e->block0, x), *outs[3];
    for (int i = 0; i < 3; i++) h = outs[i] = seres(g, &e->blocks[i], (int)e->d.channels, h);
    h = tdnn(g, &e->mfa, onnx_concat(g, "mfa.in", 3, outs));
    const char *pooled = asp(g, &e->asp, h);
    pooled = onnx_batchnorm(g, "asp_bn.out", pooled, e->asp_bn_w, e->asp_bn_b, e->asp_bn_mean, e->asp_bn_var);
    const char *y = conv(g, "fc", pooled, e->fc_w, e->fc_b, 1, 1);
    const char *axes = onnx_const_i64(g->b, "embedding.axes", 1, (int64_t[]){1}, (int64_t[]){2});
    onnx_node(g->b, "Squeeze", "embedding", 2, (const char *[]){y, axes});
    onnx_graph_output(g->b, "embedding", 2, (const char *[]){"batch", NULL}, (int64_t[]){0, E});
}

int ecapa_onnx_write(const model_t *m, const char *path, const st_meta_t *meta, int n, char *err, size_t cap) {
    const ecapa_t *e = m->impl;
    onnx_graph_t g = {onnx_builder_new("ecapa_tdnn", ONNX_OPSET), m};
    for (int i = 0; i < n; i++) onnx_metadata(g.b, meta[i].key, meta[i].value);
    build(&g, e);
    int rc = onnx_builder_write(g.b, path, err, cap) ? SPK_EXIT_FAILURE : 0;
    onnx_builder_free(g.b);
    return rc;
}
