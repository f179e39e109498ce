#include "app/train/lr_schedule.h"

#include <math.h>
#include <string.h>

lr_kind_t lr_kind_parse(const char *name) {
    if (strcmp(name, "warmup-exp") == 0) return LR_WARMUP_EXP;
    if (strcmp(name, "cosine") == 0) return LR_COSINE;
    if (strcmp(name, "cyclic") == 0) return LR_CYCLIC;
    return LR_CONSTANT;
}

double lr_at(const lr_schedule_t *s, int64_t step) {
    double lr = s->lr;
    double t = (double)(step - s->warmup_steps);  // steps after warmup
    if (t < 0) t = 0;
    switch (s->kind) {
        case LR_CONSTANT:
            break;
        case LR_WARMUP_EXP:
            lr = s->lr * pow(s->decay, t / (double)(s->steps_per_epoch > 0 ? s->steps_per_epoch : 1));
            break;
        case LR_COSINE: {
            double horizon = (double)(s->total_steps - s->warmup_steps);
            double p = horizon > 0 ? fmin(t / horizon, 1.0) : 1.0;
            lr = s->lr_min + 0.5 * (s->lr - s->lr_min) * (1.0 + cos(M_PI * p));
            break;
        }
        case LR_CYCLIC: {  // triangular: lr_min -> lr over cycle_steps, back over cycle_steps
            double c = (double)s->cycle_steps;
            double phase = fmod(t, 2.0 * c) / c;  // [0, 2)
            double up = phase <= 1.0 ? phase : 2.0 - phase;
            lr = s->lr_min + (s->lr - s->lr_min) * up;
            break;
        }
    }
    if (s->warmup_steps > 0 && step < s->warmup_steps) lr *= (double)(step + 1) / (double)s->warmup_steps;
    return lr;
}
