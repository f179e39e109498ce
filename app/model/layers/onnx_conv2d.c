// ONNX nodes of the 2-D units (app/model/layers/onnx_conv2d.h).
#include "app/model/layers/onnx_conv2d.h"

#include <string.h>

const char *onnx_fbank_input(onnx_graph_t *g, int64_t feat) {
    onnx_graph_input(g->b, "fbank", 3, (const char *[]){"batch", "frames", NULL}, (int64_t[]){0, 0, feat});
    const char *x = onnx_reduce_mean(g, "cmn.mean", "fbank", 1);
    x = onnx_op2(g, "Sub", "cmn.out", "fbank", x);
    x = onnx_op1(g, "Transpose", "input.transposed", x);
    onnx_attr_ints(g->b, "perm", 3, (int64_t[]){0, 2, 1});
    return x;
}

const char *onnx_conv2d_bn(onnx_graph_t *g, const conv2d_bn_t *u, const char *x, int relu) {
    char p[PARAM_NAME_MAX];
    onnx_prefix_of(g, u->w, strlen(".weight"), p, sizeof p);
    const conv2d_geom_t q = u->g;
    const char *y = onnx_node(g->b, "Conv", onnx_nm(p, "out"), 2, (const char *[]){x, onnx_param(g, u->w)});
    if (q.conv1d) {  // over (B, C, T)
        onnx_attr_ints(g->b, "kernel_shape", 1, (int64_t[]){q.kw});
        onnx_attr_ints(g->b, "strides", 1, (int64_t[]){q.sw});
        onnx_attr_ints(g->b, "pads", 2, (int64_t[]){q.pw, q.pw});
        onnx_attr_ints(g->b, "dilations", 1, (int64_t[]){q.dw});
    } else {
        onnx_attr_ints(g->b, "kernel_shape", 2, (int64_t[]){q.kh, q.kw});
        onnx_attr_ints(g->b, "strides", 2, (int64_t[]){q.sh, q.sw});
        onnx_attr_ints(g->b, "pads", 4, (int64_t[]){q.ph, q.pw, q.ph, q.pw});
        onnx_attr_ints(g->b, "dilations", 2, (int64_t[]){q.dh, q.dw});
    }
    onnx_prefix_of(g, u->bn_w, strlen(".weight"), p, sizeof p);
    y = onnx_batchnorm(g, onnx_nm(p, "out"), y, u->bn_w, u->bn_b, u->bn_mean, u->bn_var);
    return relu ? onnx_op1(g, "Relu", onnx_nm(p, "relu"), y) : y;
}

const char *onnx_res_block(onnx_graph_t *g, const res_block_t *b, const char *x) {
    const char *y = x;
    for (int k = 0; k < b->n - 1; k++) y = onnx_conv2d_bn(g, &b->u[k], y, 1);
    y = onnx_conv2d_bn(g, &b->u[b->n - 1], y, 0);
    const char *res = b->has_sc ? onnx_conv2d_bn(g, &b->sc, x, 0) : x;
    char p[PARAM_NAME_MAX];
    onnx_prefix_of(g, b->u[0].w, strlen(".conv1.weight"), p, sizeof p);
    return onnx_op1(g, "Relu", onnx_nm(p, "out"), onnx_op2(g, "Add", onnx_nm(p, "sum"), y, res));
}

const char *onnx_stats_pool(onnx_graph_t *g, const char *prefix, const char *h, int64_t axis, float eps) {
    char p[64];
    strncpy(p, prefix, sizeof p - 1);
    p[sizeof p - 1] = 0;
    const char *mean = onnx_reduce_mean(g, onnx_nm(p, "mean"), h, axis);
    const char *d = onnx_op2(g, "Sub", onnx_nm(p, "dev"), h, mean);
    const char *d2 = onnx_op2(g, "Mul", onnx_nm(p, "dev2"), d, d);
    const char *axes = onnx_const_i64(g->b, onnx_nm(p, "axes"), 1, (int64_t[]){1}, &axis);
    const char *ss = onnx_node(g->b, "ReduceSum", onnx_nm(p, "ss"), 2, (const char *[]){d2, axes});
    // T - 1, from the map's shape
    const char *shape = onnx_op1(g, "Shape", onnx_nm(p, "shape"), h);
    const char *t = onnx_node(g->b, "Gather", onnx_nm(p, "t"), 2,
                              (const char *[]){shape, onnx_const_i64(g->b, onnx_nm(p, "t_axis"), 0, NULL, &axis)});
    t = onnx_op1(g, "Cast", onnx_nm(p, "t_float"), t);
    onnx_attr_int(g->b, "to", 1);  // FLOAT
    const char *one = onnx_const_f32(g->b, onnx_nm(p, "one"), 0, NULL, (float[]){1.0f});
    const char *var = onnx_op2(g, "Div", onnx_nm(p, "var"), ss, onnx_op2(g, "Sub", onnx_nm(p, "t_minus_1"), t, one));
    if (eps > 0)
        var = onnx_op2(g, "Add", onnx_nm(p, "var_eps"), var, onnx_const_f32(g->b, onnx_nm(p, "eps"), 0, NULL, &eps));
    const char *sd = onnx_op1(g, "Sqrt", onnx_nm(p, "std"), var);
    const char *flat[2], *src[2] = {mean, sd};
    for (int i = 0; i < 2; i++) {
        flat[i] = onnx_op1(g, "Flatten", onnx_nm(p, i ? "std_flat" : "mean_flat"), src[i]);
        onnx_attr_int(g->b, "axis", 1);
    }
    return onnx_concat(g, onnx_nm(p, "out"), 2, flat);
}
