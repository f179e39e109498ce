#include "app/optimizer.h"

#include "app/check.h"
#include "kernels/optim.h"

#include <stdlib.h>
#include <string.h>

void optimizer_init(optimizer_t *o, const train_config_t *cfg, int64_t n) {
    memset(o, 0, sizeof *o);
    o->kind = strcmp(cfg->optimizer, "adam") == 0 ? OPTIM_ADAM : strcmp(cfg->optimizer, "adamw") == 0 ? OPTIM_ADAMW : OPTIM_SGD;
    o->slots = o->kind == OPTIM_SGD ? (cfg->momentum > 0 ? 1 : 0) : 2;
    o->n = n;
    o->momentum = cfg->momentum;
    o->weight_decay = cfg->weight_decay;
    o->nesterov = cfg->nesterov;
    o->state = callocCheck((size_t)o->slots * (size_t)n, sizeof(float));
}

void optimizer_step(optimizer_t *o, float *params, const float *grads, double lr) {
    o->step++;
    switch (o->kind) {
    case OPTIM_SGD:
        sgd_step(params, grads, o->slots ? o->state : NULL, (size_t)o->n, lr, o->momentum, 0.0,
                 o->weight_decay, o->nesterov, o->step);
        break;
    case OPTIM_ADAM:
        adam_step(params, grads, o->state, o->state + o->n, (size_t)o->n, lr, 0.9, 0.999, 1e-8,
                  o->weight_decay, o->step);
        break;
    case OPTIM_ADAMW:
        adamw_step(params, grads, o->state, o->state + o->n, (size_t)o->n, lr, 0.9, 0.999, 1e-8,
                   o->weight_decay, o->step);
        break;
    }
}

void optimizer_free(optimizer_t *o) {
    free(o->state);
    o->state = NULL;
}
