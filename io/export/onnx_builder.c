// Every message hangs off one ModelProto and every field is malloc'ed, so
// protobuf_c_message_free_unpacked (the default allocator is malloc/free) releases it all.
#include "io/export/onnx_builder.h"

#include "io/common/atomic_file.h"
#include "io/export/onnx.pb-c.h"
#include "kernels/base/check.h"

#include <stdlib.h>
#include <string.h>

#define ONNX_IR_VERSION 8

struct onnx_builder {
    Onnx__ModelProto *model;
    Onnx__GraphProto *graph;
    Onnx__NodeProto *last;  // attributes go here
};

static char *dup(const char *s) {
    char *d = strdup(s);
    if (!d) spk_die(SPK_EXIT_FAILURE, "out of memory building an ONNX graph");
    return d;
}

// Appends item to the pointer array *arr of *n elements.
#define APPEND(arr, n, item)                                                           \
    do {                                                                               \
        (arr) = realloc((arr), ((n) + 1) * sizeof *(arr));                             \
        if (!(arr)) spk_die(SPK_EXIT_FAILURE, "out of memory building an ONNX graph"); \
        (arr)[(n)++] = (item);                                                         \
    } while (0)

#define NEW(T, INIT)                    \
    ({                                  \
        T *p_ = mallocCheck(sizeof(T)); \
        *p_ = (T)INIT;                  \
        p_;                             \
    })

onnx_builder_t *onnx_builder_new(const char *graph_name, int64_t opset) {
    onnx_builder_t *b = callocCheck(1, sizeof *b);
    b->model = NEW(Onnx__ModelProto, ONNX__MODEL_PROTO__INIT);
    b->model->has_ir_version = 1;
    b->model->ir_version = ONNX_IR_VERSION;
    b->model->producer_name = dup("spkddp");
    Onnx__OperatorSetIdProto *op = NEW(Onnx__OperatorSetIdProto, ONNX__OPERATOR_SET_ID_PROTO__INIT);
    op->domain = dup("");
    op->has_version = 1;
    op->version = opset;
    APPEND(b->model->opset_import, b->model->n_opset_import, op);
    b->graph = b->model->graph = NEW(Onnx__GraphProto, ONNX__GRAPH_PROTO__INIT);
    b->graph->name = dup(graph_name);
    return b;
}

void onnx_builder_free(onnx_builder_t *b) {
    if (!b) return;
    protobuf_c_message_free_unpacked(&b->model->base, NULL);
    free(b);
}

void onnx_metadata(onnx_builder_t *b, const char *key, const char *value) {
    Onnx__StringStringEntryProto *e = NEW(Onnx__StringStringEntryProto, ONNX__STRING_STRING_ENTRY_PROTO__INIT);
    e->key = dup(key);
    e->value = dup(value);
    APPEND(b->model->metadata_props, b->model->n_metadata_props, e);
}

static Onnx__ValueInfoProto *value_info(const char *name, int ndim, const char *const *dim_names, const int64_t *dims) {
    Onnx__TensorShapeProto *shape = NEW(Onnx__TensorShapeProto, ONNX__TENSOR_SHAPE_PROTO__INIT);
    for (int i = 0; i < ndim; i++) {
        Onnx__TensorShapeProto__Dimension *d =
            NEW(Onnx__TensorShapeProto__Dimension, ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT);
        if (dim_names && dim_names[i]) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = dup(dim_names[i]);
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = dims[i];
        }
        APPEND(shape->dim, shape->n_dim, d);
    }
    Onnx__TypeProto__Tensor *tt = NEW(Onnx__TypeProto__Tensor, ONNX__TYPE_PROTO__TENSOR__INIT);
    tt->has_elem_type = 1;
    tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt->shape = shape;
    Onnx__TypeProto *type = NEW(Onnx__TypeProto, ONNX__TYPE_PROTO__INIT);
    type->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    type->tensor_type = tt;
    Onnx__ValueInfoProto *v = NEW(Onnx__ValueInfoProto, ONNX__VALUE_INFO_PROTO__INIT);
    v->name = dup(name);
    v->type = type;
    return v;
}

void onnx_graph_input(onnx_builder_t *b, const char *name, int ndim, const char *const *dim_names,
                      const int64_t *dims) {
    APPEND(b->graph->input, b->graph->n_input, value_info(name, ndim, dim_names, dims));
}

void onnx_graph_output(onnx_builder_t *b, const char *name, int ndim, const char *const *dim_names,
                       const int64_t *dims) {
    APPEND(b->graph->output, b->graph->n_output, value_info(name, ndim, dim_names, dims));
}

// An initializer holding `bytes` of raw little-endian data.
static const char *add_const(onnx_builder_t *b, const char *name, int32_t type, int ndim, const int64_t *shape,
                             const void *data, size_t elem) {
    Onnx__TensorProto *t = NEW(Onnx__TensorProto, ONNX__TENSOR_PROTO__INIT);
    size_t n = 1;
    t->n_dims = (size_t)ndim;
    t->dims = mallocCheck(((size_t)ndim + 1) * sizeof(int64_t));
    for (int i = 0; i < ndim; i++) {
        t->dims[i] = shape[i];
        n *= (size_t)shape[i];
    }
    t->has_data_type = 1;
    t->data_type = type;
    t->name = dup(name);
    t->has_raw_data = 1;
    t->raw_data.len = n * elem;
    t->raw_data.data = mallocCheck(n * elem + 1);
    memcpy(t->raw_data.data, data, n * elem);
    APPEND(b->graph->initializer, b->graph->n_initializer, t);
    return t->name;
}

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "ONNX raw_data is little-endian");

const char *onnx_const_f32(onnx_builder_t *b, const char *name, int ndim, const int64_t *shape, const float *data) {
    return add_const(b, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, ndim, shape, data, sizeof(float));
}

const char *onnx_const_i64(onnx_builder_t *b, const char *name, int ndim, const int64_t *shape, const int64_t *data) {
    return add_const(b, name, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, ndim, shape, data, sizeof(int64_t));
}

const char *onnx_node_n(onnx_builder_t *b, const char *op, int nin, const char *const *in, int nout,
                        const char *const *out) {
    Onnx__NodeProto *node = NEW(Onnx__NodeProto, ONNX__NODE_PROTO__INIT);
    node->op_type = dup(op);
    node->name = dup(out[0]);
    node->domain = dup("");
    for (int i = 0; i < nin; i++) APPEND(node->input, node->n_input, dup(in[i]));
    for (int i = 0; i < nout; i++) APPEND(node->output, node->n_output, dup(out[i]));
    APPEND(b->graph->node, b->graph->n_node, node);
    b->last = node;
    return node->output[0];
}

const char *onnx_node(onnx_builder_t *b, const char *op, const char *out, int nin, const char *const *in) {
    return onnx_node_n(b, op, nin, in, 1, &out);
}

static Onnx__AttributeProto *add_attr(onnx_builder_t *b, const char *name, Onnx__AttributeProto__AttributeType type) {
    if (!b->last) spk_die(SPK_EXIT_FAILURE, "ONNX attribute '%s' before any node", name);
    Onnx__AttributeProto *a = NEW(Onnx__AttributeProto, ONNX__ATTRIBUTE_PROTO__INIT);
    a->name = dup(name);
    a->has_type = 1;
    a->type = type;
    APPEND(b->last->attribute, b->last->n_attribute, a);
    return a;
}

void onnx_attr_int(onnx_builder_t *b, const char *name, int64_t v) {
    Onnx__AttributeProto *a = add_attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

void onnx_attr_ints(onnx_builder_t *b, const char *name, int n, const int64_t *v) {
    Onnx__AttributeProto *a = add_attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = (size_t)n;
    a->ints = mallocCheck(((size_t)n + 1) * sizeof(int64_t));
    memcpy(a->ints, v, (size_t)n * sizeof(int64_t));
}

void onnx_attr_float(onnx_builder_t *b, const char *name, float v) {
    Onnx__AttributeProto *a = add_attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

void onnx_attr_string(onnx_builder_t *b, const char *name, const char *v) {
    Onnx__AttributeProto *a = add_attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.len = strlen(v);
    a->s.data = (uint8_t *)dup(v);
}

int onnx_builder_write(onnx_builder_t *b, const char *path, char *err, size_t cap) {
    const size_t n = onnx__model_proto__get_packed_size(b->model);
    uint8_t *buf = mallocCheck(n + 1);
    if (onnx__model_proto__pack(b->model, buf) != n)
        spk_die(SPK_EXIT_FAILURE, "%s: protobuf-c packed a different size than it computed", path);
    int rc = atomic_write_file(path, buf, n, ATOMIC_REPLACE, err, cap);
    free(buf);
    return rc;
}
