// The models' hyperparameters (app/model/core/model_config.h).
#include "app/model/core/model_config.h"

#include <stdio.h>
#include <string.h>

model_config_t model_config_defaults(const char *name) {
    // SpeechBrain's ECAPA-TDNN widths; the AAM-softmax of its VoxCeleb recipe.
    model_config_t c = {.channels = 512, .emb_dim = 192, .att_channels = 128, .se_channels = 128};
    c.visual_channels = 256;
    c.margin = 0.2, c.scale = 30;
    c.seed = 1234;
    c.invariant_group = 1;
    snprintf(c.name, sizeof c.name, "%s", name);
    snprintf(c.precision, sizeof c.precision, "fp32");
    return c;
}

int model_config_apply_tf32(model_config_t *c, int tf32) {
    if (!tf32) return 0;
    if (strcmp(c->precision, "bf16") == 0) return -1;
    snprintf(c->precision, sizeof c->precision, "tf32");
    return 0;
}
