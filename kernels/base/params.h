// Named views into one contiguous parameter buffer. Models register tensors in reverse
// execution order (the head first), so the gradients a backward pass finishes first form
// one contiguous slice at the front of the gradient buffer, ready to be reduced early.
#pragma once
#include <stddef.h>
#include <stdint.h>

#define PARAM_NAME_MAX 64
#define PARAM_MAX_DIMS 4

typedef struct {
    char name[PARAM_NAME_MAX];  // "blocks.1.res2net.2.conv.weight"
    int64_t offset;             // into the buffer, in floats
    int64_t numel;
    int ndim;
    int64_t shape[PARAM_MAX_DIMS];
} param_tensor_t;

typedef struct {
    param_tensor_t *t;  // (count,)
    int count, cap;
    int64_t total;  // floats in the buffer
} param_table_t;

// Registers a tensor and returns its offset. shape has ndim entries.
int64_t param_table_add(param_table_t *p, const char *name, int ndim, const int64_t *shape);
void param_table_free(param_table_t *p);
// 1 when both tables have the same names, shapes and offsets.
int param_table_equal(const param_table_t *a, const param_table_t *b);
// 0 when they are equal; else 1, and `why` (may be NULL) says where a first differs from b:
// "'blocks.0.conv.weight' is (16, 8, 3) against (8, 8, 3)", "52 tensors against 47", ...
int param_table_difference(const param_table_t *a, const param_table_t *b, char *why, size_t cap);
