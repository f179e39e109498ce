// The optimizer over the flat parameter buffer: SGD (momentum, Nesterov), Adam, AdamW with
// PyTorch's semantics. Its slots (momentum / Adam moments) live in one buffer of
// slots * num_params floats, checkpointed as they are.
#pragma once
#include "app/config.h"

#include <stdint.h>

typedef enum { OPTIM_SGD, OPTIM_ADAM, OPTIM_ADAMW } optim_kind_t;

typedef struct {
    optim_kind_t kind;
    int slots;        // 0 (plain SGD), 1 (momentum), 2 (Adam m, v)
    float *state;     // (slots, n)
    int64_t n;
    int64_t step;     // updates taken (Adam bias correction)
    double momentum, weight_decay;
    int nesterov;
} optimizer_t;

void optimizer_init(optimizer_t *o, const train_config_t *cfg, int64_t n);
void optimizer_step(optimizer_t *o, float *params, const float *grads, double lr);
void optimizer_free(optimizer_t *o);
