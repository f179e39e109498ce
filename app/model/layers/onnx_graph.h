// What the ONNX exports of the model families share (app/model/<family>/*_export.c): a graph
// under construction with its model, names for node outputs, the model's tensors as
// initializers under their state-dict names, and the few node shapes every graph uses.
#pragma once
#include "app/model/core/model_core.h"
#include "io/export/onnx_builder.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    onnx_builder_t *b;
    const model_t *m;
} onnx_graph_t;

// "<prefix>.<what>": a name for a node output or constant, valid until 15 more calls. The
// builder copies names, and every function here returns the builder's copy; a caller that keeps
// a prefix across calls copies it first.
const char *onnx_nm(const char *prefix, const char *what);
// The parameter (or BatchNorm statistic) at an offset of the model's tables, as an initializer
// under its own name (from host_params / host_state).
const char *onnx_param(onnx_graph_t *g, int64_t offset);
const char *onnx_state(onnx_graph_t *g, int64_t offset);
// The name of the parameter at offset minus its last `strip` characters (a layer's prefix).
void onnx_prefix_of(const onnx_graph_t *g, int64_t offset, size_t strip, char *out, size_t cap);
// Nodes of one and two inputs; ReduceMean over one axis (kept); Concat along axis 1.
const char *onnx_op1(onnx_graph_t *g, const char *op, const char *out, const char *x);
const char *onnx_op2(onnx_graph_t *g, const char *op, const char *out, const char *x, const char *y);
const char *onnx_reduce_mean(onnx_graph_t *g, const char *out, const char *x, int64_t axis);
const char *onnx_concat(onnx_graph_t *g, const char *out, int n, const char *const *x);
// BatchNormalization (inference) with the tensors at those offsets and PyTorch's eps 1e-5.
const char *onnx_batchnorm(onnx_graph_t *g, const char *out, const char *x, int64_t w, int64_t b, int64_t mean,
                           int64_t var);
