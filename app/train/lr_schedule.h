// Learning rate as a pure function of the global step, so a resumed run (on any world size)
// continues the exact schedule. Every schedule starts with an optional linear warmup.
#pragma once
#include <stdint.h>

typedef enum { LR_CONSTANT, LR_WARMUP_EXP, LR_COSINE, LR_CYCLIC } lr_kind_t;

typedef struct {
    lr_kind_t kind;
    double lr;      // peak
    double lr_min;  // cosine/cyclic floor
    double decay;   // warmup-exp: factor per epoch
    int64_t warmup_steps;
    int64_t cycle_steps;  // cyclic: steps from lr_min to lr
    int64_t steps_per_epoch;
    int64_t total_steps;  // cosine horizon
} lr_schedule_t;

lr_kind_t lr_kind_parse(const char *name);  // name already validated by the option table
double lr_at(const lr_schedule_t *s, int64_t step);
