// An ONNX model built node by node and written as one protobuf message (ModelProto of
// onnx.proto, compiled by protoc-c at build time from the copy Debian's libonnx-dev ships;
// libprotobuf-c serialises it). The graph holds float tensors only; names are the caller's
// and must be unique. Usage:
//   onnx_builder_t *b = onnx_builder_new("ecapa", 17);
//   onnx_graph_input(b, "fbank", 3, (const char *[]){"batch", "frames", NULL}, (int64_t[]){0, 0, 80});
//   const char *w = onnx_const_f32(b, "fc.weight", 3, shape, data);
//   const char *y = onnx_node(b, "Conv", "fc.out", 2, (const char *[]){x, w});
//   onnx_attr_ints(b, "dilations", 1, (int64_t[]){2});      // on the node just added
//   onnx_graph_output(b, y, ...);  onnx_builder_write(b, "model.onnx", err, cap);  onnx_builder_free(b);
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct onnx_builder onnx_builder_t;

// A model importing the default domain at `opset` (IR version 8, the ONNX 1.12 format).
onnx_builder_t *onnx_builder_new(const char *graph_name, int64_t opset);
void onnx_builder_free(onnx_builder_t *b);
// Model metadata (metadata_props), shown by ONNX tools and readable from ONNX Runtime.
void onnx_metadata(onnx_builder_t *b, const char *key, const char *value);

// Graph inputs and outputs: float tensors; axis i is symbolic (dynamic) when dim_names[i] is
// not NULL, else of size dims[i].
void onnx_graph_input(onnx_builder_t *b, const char *name, int ndim, const char *const *dim_names, const int64_t *dims);
void onnx_graph_output(onnx_builder_t *b, const char *name, int ndim, const char *const *dim_names,
                       const int64_t *dims);

// Initializers (copied). Return the name, owned by the builder.
const char *onnx_const_f32(onnx_builder_t *b, const char *name, int ndim, const int64_t *shape, const float *data);
const char *onnx_const_i64(onnx_builder_t *b, const char *name, int ndim, const int64_t *shape, const int64_t *data);

// A node of the default domain with inputs `in` and outputs `out`; returns out[0], owned by
// the builder. onnx_node: one output.
const char *onnx_node_n(onnx_builder_t *b, const char *op, int nin, const char *const *in, int nout,
                        const char *const *out);
const char *onnx_node(onnx_builder_t *b, const char *op, const char *out, int nin, const char *const *in);
// Attributes of the node added last.
void onnx_attr_int(onnx_builder_t *b, const char *name, int64_t v);
void onnx_attr_ints(onnx_builder_t *b, const char *name, int n, const int64_t *v);
void onnx_attr_float(onnx_builder_t *b, const char *name, float v);
void onnx_attr_string(onnx_builder_t *b, const char *name, const char *v);

// Serialises the model and writes it atomically (io/common/atomic_file.h). 0, or -1 with one
// sentence naming the file in err.
int onnx_builder_write(onnx_builder_t *b, const char *path, char *err, size_t cap);
