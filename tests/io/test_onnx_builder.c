// The ONNX builder: a small graph written and read back with libprotobuf-c -- IR and opset
// versions, symbolic and fixed axes, initializers' raw data, nodes, attributes and metadata
// as given. ONNX's own checker and ONNX Runtime run the exported ECAPA graph in
// tests/interop (onnx_check.py).
#include "io/export/onnx.pb-c.h"
#include "io/export/onnx_builder.h"
#include "tests/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *PATH = "test_onnx_builder.onnx";

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(*n + 1);
    if (fread(buf, 1, *n, f) != *n) *n = 0;
    fclose(f);
    return buf;
}

int main(void) {
    const float w[6] = {1, 2, 3, 4, 5, 6};
    onnx_builder_t *b = onnx_builder_new("tiny", 17);
    onnx_metadata(b, "spkddp_model", "ecapa");
    onnx_graph_input(b, "x", 2, (const char *[]){"batch", NULL}, (int64_t[]){0, 3});
    const char *W = onnx_const_f32(b, "layer.weight", 2, (int64_t[]){3, 2}, w);
    const char *axes = onnx_const_i64(b, "axes", 1, (int64_t[]){1}, (int64_t[]){1});
    const char *y = onnx_node(b, "MatMul", "y", 2, (const char *[]){"x", W});
    const char *z = onnx_node(b, "ReduceSum", "z", 2, (const char *[]){y, axes});
    onnx_attr_int(b, "keepdims", 0);
    onnx_node(b, "LeakyRelu", "out", 1, (const char *[]){z});
    onnx_attr_float(b, "alpha", 0.25f);
    onnx_node_n(b, "Split", 1, (const char *[]){"x"}, 2, (const char *[]){"s0", "s1"});
    onnx_attr_ints(b, "split", 2, (int64_t[]){1, 2});
    onnx_attr_string(b, "note", "kept");
    onnx_graph_output(b, "out", 1, (const char *[]){"batch"}, NULL);
    char err[256];
    EXPECT(onnx_builder_write(b, PATH, err, sizeof err) == 0, "%s", err);
    onnx_builder_free(b);

    size_t n = 0;
    uint8_t *buf = slurp(PATH, &n);
    Onnx__ModelProto *m = buf ? onnx__model_proto__unpack(NULL, n, buf) : NULL;
    EXPECT(m, "the file does not parse as an ONNX ModelProto");
    if (m) {
        EXPECT(m->has_ir_version && m->ir_version == 8, "IR version %lld", (long long)m->ir_version);
        EXPECT(m->n_opset_import == 1 && m->opset_import[0]->version == 17 && !strcmp(m->opset_import[0]->domain, ""),
               "opset import");
        EXPECT(m->n_metadata_props == 1 && !strcmp(m->metadata_props[0]->value, "ecapa"), "metadata");
        const Onnx__GraphProto *g = m->graph;
        EXPECT(g->n_input == 1 && g->n_output == 1 && g->n_initializer == 2 && g->n_node == 4, "graph sizes");
        const Onnx__TensorShapeProto *s = g->input[0]->type->tensor_type->shape;
        EXPECT(s->n_dim == 2 && s->dim[0]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                   !strcmp(s->dim[0]->dim_param, "batch") && s->dim[1]->dim_value == 3,
               "input axes");
        const Onnx__TensorProto *t = g->initializer[0];
        EXPECT(!strcmp(t->name, "layer.weight") && t->n_dims == 2 && t->dims[0] == 3 && t->data_type == 1 &&
                   t->raw_data.len == sizeof w && !memcmp(t->raw_data.data, w, sizeof w),
               "weight initializer");
        EXPECT(g->initializer[1]->data_type == 7 && g->initializer[1]->raw_data.len == 8, "int64 initializer");
        const Onnx__NodeProto *r = g->node[1], *l = g->node[2], *sp = g->node[3];
        EXPECT(!strcmp(r->op_type, "ReduceSum") && r->n_input == 2 && !strcmp(r->input[1], "axes") &&
                   r->n_attribute == 1 && r->attribute[0]->i == 0,
               "ReduceSum node");
        EXPECT(l->n_attribute == 1 && l->attribute[0]->f == 0.25f, "float attribute");
        EXPECT(sp->n_output == 2 && !strcmp(sp->output[1], "s1") && sp->attribute[0]->n_ints == 2 &&
                   sp->attribute[0]->ints[1] == 2 && sp->attribute[1]->s.len == 4,
               "Split node");
        onnx__model_proto__free_unpacked(m, NULL);
    }
    free(buf);
    remove(PATH);
    return test_report("test_onnx_builder");
}
