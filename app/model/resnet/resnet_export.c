// WeSpeaker's ResNets in their toolkit's terms (app/model/resnet/resnet_export.h).
#include "app/model/resnet/resnet_export.h"

#include "app/model/layers/onnx_conv2d.h"
#include "app/model/resnet/resnet.h"
#include "kernels/base/check.h"

#include <stdio.h>

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

static void build(onnx_graph_t *g, const resnet_t *r) {
    // (B, T, F) mean-normalised, as the (B, 1, F, T) image
    const char *x = onnx_node(g->b, "Unsqueeze", "input.image", 2,
                              (const char *[]){onnx_fbank_input(g, r->feat),
                                               onnx_const_i64(g->b, "input.axes", 1, (int64_t[]){1}, (int64_t[]){1})});
    const char *h = onnx_conv2d_bn(g, &r->stem, x, 1);
    for (int i = 0; i < r->nblocks; i++) h = onnx_res_block(g, &r->block[i], h);
    // WeSpeaker's TSTP: the mean and sqrt(unbiased variance + 1e-7) over time (axis 3)
    onnx_node(
        g->b, "Gemm", "embedding", 3,
        (const char *[]){onnx_stats_pool(g, "pool", h, 3, TSTP_EPS), onnx_param(g, r->seg_w), onnx_param(g, r->seg_b)});
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
