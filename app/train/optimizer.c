#include "app/train/optimizer.h"

#include "kernels/base/check.h"

#include <stdlib.h>
#include <string.h>

static size_t state_bytes(const optimizer_t *o) { return (size_t)o->slots * (size_t)o->n * sizeof(float); }

optim_kind_t optimizer_kind_parse(const char *name) {
    if (strcmp(name, "adam") == 0) return OPTIM_ADAM;
    if (strcmp(name, "adamw") == 0) return OPTIM_ADAMW;
    return OPTIM_SGD;
}

int optimizer_slots(const optimizer_config_t *cfg) { return cfg->kind == OPTIM_SGD ? (cfg->momentum > 0 ? 1 : 0) : 2; }

void optimizer_init(optimizer_t *o, const optimizer_config_t *cfg, int64_t n, const spk_backend_t *be) {
    memset(o, 0, sizeof *o);
    o->kind = cfg->kind;
    o->be = be;
    o->slots = optimizer_slots(cfg);
    o->n = n;
    o->momentum = cfg->momentum;
    o->weight_decay = cfg->weight_decay;
    o->nesterov = cfg->nesterov;
    o->state = be->alloc(state_bytes(o));
    o->host_state = be->separate_memory ? callocCheck(state_bytes(o) + 1, 1) : o->state;
}

void optimizer_step(optimizer_t *o, float *params, const float *grads, double lr) {
    const spk_backend_t *K = o->be;
    o->step++;
    switch (o->kind) {
        case OPTIM_SGD:
            K->sgd_step(params, grads, o->slots ? o->state : NULL, (size_t)o->n, lr, o->momentum, 0.0, o->weight_decay,
                        o->nesterov, o->step);
            break;
        case OPTIM_ADAM:
            K->adam_step(params, grads, o->state, o->state + o->n, (size_t)o->n, lr, 0.9, 0.999, 1e-8, o->weight_decay,
                         o->step);
            break;
        case OPTIM_ADAMW:
            K->adamw_step(params, grads, o->state, o->state + o->n, (size_t)o->n, lr, 0.9, 0.999, 1e-8, o->weight_decay,
                          o->step);
            break;
    }
}

void optimizer_upload(optimizer_t *o) {
    if (o->be->separate_memory) o->be->upload(o->state, o->host_state, state_bytes(o));
}

void optimizer_download(optimizer_t *o) {
    if (o->be->separate_memory) o->be->download(o->host_state, o->state, state_bytes(o));
}

void optimizer_free(optimizer_t *o) {
    if (o->be->separate_memory) free(o->host_state);
    o->be->free(o->state);
    o->state = o->host_state = NULL;
}
