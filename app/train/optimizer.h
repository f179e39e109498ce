// The optimizer over the flat parameter buffer: SGD (momentum, Nesterov), Adam, AdamW with
// PyTorch's semantics. Its slots (momentum / Adam moments) live in one buffer of
// slots * num_params floats on the model's backend, checkpointed as they are through a host
// copy (host_state, the same buffer on a host-memory backend).
#pragma once
#include "kernels/backend.h"

#include <stdint.h>

typedef enum { OPTIM_SGD, OPTIM_ADAM, OPTIM_ADAMW } optim_kind_t;

// What an optimizer is built from (Adam's betas and epsilon are PyTorch's defaults; the
// learning rate comes with every step).
typedef struct {
    optim_kind_t kind;
    double momentum;      // SGD: 0 is plain SGD (no slot)
    double weight_decay;  // SGD, Adam: L2 added to the gradient; AdamW: decoupled
    int nesterov;         // SGD with momentum
} optimizer_config_t;

optim_kind_t optimizer_kind_parse(const char *name);  // sgd | adam | adamw, validated by the option table

typedef struct {
    optim_kind_t kind;
    const spk_backend_t *be;
    int slots;          // 0 (plain SGD), 1 (momentum), 2 (Adam m, v)
    float *state;       // (slots, n) on be
    float *host_state;  // (slots, n) on the host
    int64_t n;
    int64_t step;  // updates taken (Adam bias correction)
    double momentum, weight_decay;
    int nesterov;
} optimizer_t;

// Buffers of n floats the optimizer keeps: 0 (plain SGD), 1 (momentum), 2 (Adam m, v).
int optimizer_slots(const optimizer_config_t *cfg);
void optimizer_init(optimizer_t *o, const optimizer_config_t *cfg, int64_t n, const spk_backend_t *be);
// params and grads are on the backend.
void optimizer_step(optimizer_t *o, float *params, const float *grads, double lr);
// host_state -> state, and back (nothing to do on a host-memory backend).
void optimizer_upload(optimizer_t *o);
void optimizer_download(optimizer_t *o);
void optimizer_free(optimizer_t *o);
