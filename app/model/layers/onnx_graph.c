// ONNX graph helpers of the model families (app/model/layers/onnx_graph.h).
#include "app/model/layers/onnx_graph.h"

#include "kernels/base/check.h"

#include <stdio.h>
#include <string.h>

#define BN_EPS 1e-5f  // PyTorch's BatchNorm default, every family's

// "<prefix>.<what>": a name for a node output or constant, valid until 15 more calls. The
// builder copies names, and every function here returns the builder's copy; one that keeps
// a prefix across calls copies it first.
const char *onnx_nm(const char *prefix, const char *what) {
    static char buf[16][256];
    static int k;
    k = (k + 1) % 16;
    snprintf(buf[k], sizeof buf[k], "%.120s.%.120s", prefix, what);
    return buf[k];
}

// The tensor of `table` at `offset`, as an initializer under its own name.
static const char *tensor(onnx_graph_t *g, const param_table_t *table, const float *data, int64_t offset) {
    for (int i = 0; i < table->count; i++) {
        const param_tensor_t *t = &table->t[i];
        if (t->offset == offset) return onnx_const_f32(g->b, t->name, t->ndim, t->shape, data + offset);
    }
    spk_die(SPK_EXIT_FAILURE, "no tensor at offset %lld of model %s", (long long)offset, g->m->name);
}
const char *onnx_param(onnx_graph_t *g, int64_t off) { return tensor(g, &g->m->table, g->m->host_params, off); }
const char *onnx_state(onnx_graph_t *g, int64_t off) { return tensor(g, &g->m->state_table, g->m->host_state, off); }

const char *onnx_op1(onnx_graph_t *g, const char *op, const char *out, const char *x) {
    return onnx_node(g->b, op, out, 1, (const char *[]){x});
}
const char *onnx_op2(onnx_graph_t *g, const char *op, const char *out, const char *x, const char *y) {
    return onnx_node(g->b, op, out, 2, (const char *[]){x, y});
}
const char *onnx_reduce_mean(onnx_graph_t *g, const char *out, const char *x, int64_t axis) {
    const char *y = onnx_op1(g, "ReduceMean", out, x);  // opset 17: axes is an attribute
    onnx_attr_ints(g->b, "axes", 1, &axis);
    onnx_attr_int(g->b, "keepdims", 1);
    return y;
}
const char *onnx_concat(onnx_graph_t *g, const char *out, int n, const char *const *x) {
    const char *y = onnx_node(g->b, "Concat", out, n, x);
    onnx_attr_int(g->b, "axis", 1);
    return y;
}

// The name of the parameter at offset minus its last `strip` characters (a layer's prefix).
void onnx_prefix_of(const onnx_graph_t *g, int64_t offset, size_t strip, char *out, size_t cap) {
    for (int i = 0; i < g->m->table.count; i++)
        if (g->m->table.t[i].offset == offset) {
            const char *s = g->m->table.t[i].name;
            snprintf(out, cap, "%.*s", (int)(strlen(s) > strip ? strlen(s) - strip : 0), s);
            return;
        }
    spk_die(SPK_EXIT_FAILURE, "no parameter at offset %lld", (long long)offset);
}

const char *onnx_batchnorm(onnx_graph_t *g, const char *out, const char *x, int64_t w, int64_t b, int64_t mean,
                           int64_t var) {
    const char *y =
        onnx_node(g->b, "BatchNormalization", out, 5,
                  (const char *[]){x, onnx_param(g, w), onnx_param(g, b), onnx_state(g, mean), onnx_state(g, var)});
    onnx_attr_float(g->b, "epsilon", BN_EPS);
    return y;
}
