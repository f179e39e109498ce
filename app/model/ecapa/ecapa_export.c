// ECAPA-TDNN in other toolkits' terms: SpeechBrain's constructor arguments, and the encoder
// as an ONNX graph that mirrors SpeechBrain's ECAPA_TDNN.forward node for node. Initializers
// carry the SpeechBrain state-dict names of the tensors they hold.
#include "app/model/ecapa/ecapa_export.h"

#include "app/model/ecapa/ecapa.h"
#include "io/export/onnx_builder.h"
#include "kernels/base/check.h"

#include <stdio.h>
#include <string.h>

#define ONNX_OPSET 17
#define BN_EPS     1e-5f
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

typedef struct {
    onnx_builder_t *b;
    const model_t *m;
} graph_t;

// "<prefix>.<what>": a name for a node output or constant, valid until 15 more calls. The
// builder copies names, and every function here returns the builder's copy; one that keeps
// a prefix across calls copies it first.
static const char *nm(const char *prefix, const char *what) {
    static char buf[16][256];
    static int k;
    k = (k + 1) % 16;
    snprintf(buf[k], sizeof buf[k], "%.120s.%.120s", prefix, what);
    return buf[k];
}

// The tensor of `table` at `offset`, as an initializer under its own name.
static const char *tensor(graph_t *g, const param_table_t *table, const float *data, int64_t offset) {
    for (int i = 0; i < table->count; i++) {
        const param_tensor_t *t = &table->t[i];
        if (t->offset == offset) return onnx_const_f32(g->b, t->name, t->ndim, t->shape, data + offset);
    }
    spk_die(SPK_EXIT_FAILURE, "no tensor at offset %lld of model %s", (long long)offset, g->m->name);
}
static const char *param(graph_t *g, int64_t off) { return tensor(g, &g->m->table, g->m->host_params, off); }
static const char *state(graph_t *g, int64_t off) { return tensor(g, &g->m->state_table, g->m->host_state, off); }

static const char *op1(graph_t *g, const char *op, const char *out, const char *x) {
    return onnx_node(g->b, op, out, 1, (const char *[]){x});
}
static const char *op2(graph_t *g, const char *op, const char *out, const char *x, const char *y) {
    return onnx_node(g->b, op, out, 2, (const char *[]){x, y});
}
static const char *reduce_mean(graph_t *g, const char *out, const char *x, int64_t axis) {
    const char *y = op1(g, "ReduceMean", out, x);  // opset 17: axes is an attribute
    onnx_attr_ints(g->b, "axes", 1, &axis);
    onnx_attr_int(g->b, "keepdims", 1);
    return y;
}
static const char *concat(graph_t *g, const char *out, int n, const char *const *x) {
    const char *y = onnx_node(g->b, "Concat", out, n, x);
    onnx_attr_int(g->b, "axis", 1);
    return y;
}

// Conv1d with SpeechBrain's "same" reflect padding: Pad (reflect) + Conv with dilation.
static const char *conv(graph_t *g, const char *name, const char *x, int64_t w, int64_t b, int k, int dil) {
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%.250s", name);
    if (k > 1) {
        const int64_t p = (int64_t)dil * (k - 1) / 2;
        const char *pads = onnx_const_i64(g->b, nm(prefix, "pads"), 1, (int64_t[]){6}, (int64_t[]){0, 0, p, 0, 0, p});
        x = op2(g, "Pad", nm(prefix, "padded"), x, pads);
        onnx_attr_string(g->b, "mode", "reflect");
    }
    const char *out = onnx_node(g->b, "Conv", nm(prefix, "out"), 3, (const char *[]){x, param(g, w), param(g, b)});
    onnx_attr_ints(g->b, "kernel_shape", 1, (int64_t[]){k});
    onnx_attr_ints(g->b, "dilations", 1, (int64_t[]){dil});
    return out;
}

static const char *batchnorm(graph_t *g, const char *out, const char *x, int64_t w, int64_t b, int64_t mean,
                             int64_t var) {
    const char *y = onnx_node(g->b, "BatchNormalization", out, 5,
                              (const char *[]){x, param(g, w), param(g, b), state(g, mean), state(g, var)});
    onnx_attr_float(g->b, "epsilon", BN_EPS);
    return y;
}

// The name of the parameter at offset minus its last `strip` characters (a layer's prefix).
static void prefix_of(const graph_t *g, int64_t offset, size_t strip, char *out, size_t cap) {
    for (int i = 0; i < g->m->table.count; i++)
        if (g->m->table.t[i].offset == offset) {
            const char *s = g->m->table.t[i].name;
            snprintf(out, cap, "%.*s", (int)(strlen(s) > strip ? strlen(s) - strip : 0), s);
            return;
        }
    spk_die(SPK_EXIT_FAILURE, "no parameter at offset %lld", (long long)offset);
}

// TDNNBlock: conv -> ReLU -> BatchNorm.
static const char *tdnn(graph_t *g, const tdnn_t *l, const char *x) {
    char p[PARAM_NAME_MAX];
    prefix_of(g, l->w, strlen(".conv.conv.weight"), p, sizeof p);
    const char *y = conv(g, nm(p, "conv"), x, l->w, l->b, l->k, l->dil);
    y = op1(g, "Relu", nm(p, "relu"), y);
    return batchnorm(g, nm(p, "norm"), y, l->bn_w, l->bn_b, l->run_mean, l->run_var);
}

// SERes2NetBlock: TDNN 1x1 -> Res2Net -> TDNN 1x1 -> squeeze-excitation -> + input.
static const char *seres(graph_t *g, const seres_t *s, int C, const char *x) {
    char p[PARAM_NAME_MAX], chunk[ECAPA_SCALE][PARAM_NAME_MAX + 32];
    prefix_of(g, s->se1_w, strlen(".se_block.conv1.conv.weight"), p, sizeof p);
    const char *t1 = tdnn(g, &s->tdnn1, x);
    const char *outs[ECAPA_SCALE], *ys[ECAPA_SCALE];
    int64_t split[ECAPA_SCALE];
    for (int i = 0; i < ECAPA_SCALE; i++) {
        snprintf(chunk[i], sizeof chunk[i], "%.60s.res2net_block.chunk%d", p, i);
        outs[i] = chunk[i];
        split[i] = C / ECAPA_SCALE;
    }
    const char *sizes = onnx_const_i64(g->b, nm(p, "res2net_block.split"), 1, (int64_t[]){ECAPA_SCALE}, split);
    onnx_node_n(g->b, "Split", 2, (const char *[]){t1, sizes}, ECAPA_SCALE, outs);
    onnx_attr_int(g->b, "axis", 1);
    ys[0] = chunk[0];
    for (int i = 1; i < ECAPA_SCALE; i++) {
        char in[PARAM_NAME_MAX + 32];
        snprintf(in, sizeof in, "%.60s.res2net_block.in%d", p, i);
        ys[i] = tdnn(g, &s->res[i - 1], i == 1 ? chunk[1] : op2(g, "Add", in, chunk[i], ys[i - 1]));
    }
    const char *t2 = tdnn(g, &s->tdnn2, concat(g, nm(p, "res2net_block.out"), ECAPA_SCALE, ys));
    const char *z = reduce_mean(g, nm(p, "se_block.mean"), t2, 2);
    z = conv(g, nm(p, "se_block.conv1"), z, s->se1_w, s->se1_b, 1, 1);
    z = op1(g, "Relu", nm(p, "se_block.relu"), z);
    z = conv(g, nm(p, "se_block.conv2"), z, s->se2_w, s->se2_b, 1, 1);
    z = op1(g, "Sigmoid", nm(p, "se_block.sigmoid"), z);
    z = op2(g, "Mul", nm(p, "se_block.out"), t2, z);
    return op2(g, "Add", nm(p, "out"), z, x);
}

// Weighted mean and standard deviation over time of h (B, C, T) with weights w (B, 1|C, T)
// summing to 1 in time (NULL: uniform): SpeechBrain's _compute_statistics; [mean | std] as
// (B, 2C, 1), or the mean with the std in *std_out when std_out is not NULL.
static const char *stats(graph_t *g, const char *name, const char *h, const char *w, const char **std_out) {
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%.250s", name);
    const char *eps = onnx_const_f32(g->b, nm(prefix, "eps"), 0, NULL, (float[]){STATS_EPS});
    const char *axes = w ? onnx_const_i64(g->b, nm(prefix, "axes"), 1, (int64_t[]){1}, (int64_t[]){2}) : NULL;
    const char *mean, *var;
    if (w) {
        mean = onnx_node(g->b, "ReduceSum", nm(prefix, "mean"), 2,
                         (const char *[]){op2(g, "Mul", nm(prefix, "wh"), w, h), axes});
    } else {
        mean = reduce_mean(g, nm(prefix, "mean"), h, 2);
    }
    const char *d = op2(g, "Sub", nm(prefix, "dev"), h, mean);
    const char *d2 = op2(g, "Mul", nm(prefix, "dev2"), d, d);
    if (w)
        var = onnx_node(g->b, "ReduceSum", nm(prefix, "var"), 2,
                        (const char *[]){op2(g, "Mul", nm(prefix, "wdev2"), w, d2), axes});
    else
        var = reduce_mean(g, nm(prefix, "var"), d2, 2);
    const char *sd = op1(g, "Sqrt", nm(prefix, "std"), op2(g, "Max", nm(prefix, "var_floor"), var, eps));
    if (std_out) {
        *std_out = sd;
        return mean;
    }
    return concat(g, nm(prefix, "pooled"), 2, (const char *[]){mean, sd});
}

// AttentiveStatisticsPooling with global context: attention from [h, mean, std] over time.
static const char *asp(graph_t *g, const asp_t *a, const char *h) {
    char p[PARAM_NAME_MAX];
    prefix_of(g, a->conv_w, strlen(".conv.conv.weight"), p, sizeof p);
    const char *sd, *mean = stats(g, nm(p, "global"), h, NULL, &sd);
    const char *shape = op1(g, "Shape", nm(p, "shape"), h);
    const char *ctx[3] = {h, op2(g, "Expand", nm(p, "mean_t"), mean, shape),
                          op2(g, "Expand", nm(p, "std_t"), sd, shape)};
    const char *att = tdnn(g, &a->tdnn, concat(g, nm(p, "context"), 3, ctx));
    att = op1(g, "Tanh", nm(p, "tanh"), att);
    att = conv(g, nm(p, "conv"), att, a->conv_w, a->conv_b, 1, 1);
    att = op1(g, "Softmax", nm(p, "attention"), att);
    onnx_attr_int(g->b, "axis", 2);
    return stats(g, nm(p, "weighted"), h, att, NULL);
}

static void build(graph_t *g, const ecapa_t *e) {
    const int64_t F = e->d.feat, E = e->d.emb;
    onnx_graph_input(g->b, "fbank", 3, (const char *[]){"batch", "frames", NULL}, (int64_t[]){0, 0, F});
    // The loader's per-utterance mean normalisation, then (B, T, F) -> (B, F, T).
    const char *x = reduce_mean(g, "cmn.mean", "fbank", 1);
    x = op2(g, "Sub", "cmn.out", "fbank", x);
    x = op1(g, "Transpose", "input.transposed", x);
    onnx_attr_ints(g->b, "perm", 3, (int64_t[]){0, 2, 1});
    const char *h = tdnn(g, &e->block0, x), *outs[3];
    for (int i = 0; i < 3; i++) h = outs[i] = seres(g, &e->blocks[i], (int)e->d.channels, h);
    h = tdnn(g, &e->mfa, concat(g, "mfa.in", 3, outs));
    const char *pooled = asp(g, &e->asp, h);
    pooled = batchnorm(g, "asp_bn.out", pooled, e->asp_bn_w, e->asp_bn_b, e->asp_bn_mean, e->asp_bn_var);
    const char *y = conv(g, "fc", pooled, e->fc_w, e->fc_b, 1, 1);
    const char *axes = onnx_const_i64(g->b, "embedding.axes", 1, (int64_t[]){1}, (int64_t[]){2});
    onnx_node(g->b, "Squeeze", "embedding", 2, (const char *[]){y, axes});
    onnx_graph_output(g->b, "embedding", 2, (const char *[]){"batch", NULL}, (int64_t[]){0, E});
}

int ecapa_onnx_write(const model_t *m, const char *path, const st_meta_t *meta, int n, char *err, size_t cap) {
    const ecapa_t *e = m->impl;
    graph_t g = {onnx_builder_new("ecapa_tdnn", ONNX_OPSET), m};
    for (int i = 0; i < n; i++) onnx_metadata(g.b, meta[i].key, meta[i].value);
    build(&g, e);
    int rc = onnx_builder_write(g.b, path, err, cap) ? SPK_EXIT_FAILURE : 0;
    onnx_builder_free(g.b);
    return rc;
}
