// The models' hyperparameters (app/model/core/model_config.h).
#include "app/model/core/model_config.h"

#include <stdio.h>
#include <string.h>

model_config_t model_config_defaults(const char *name) {
    // The width and the embedding size are the model's own unless set (app/model/registry.c);
    // SpeechBrain's ECAPA-TDNN attention and excitation widths; the AAM-softmax of its recipe.
    model_config_t c = {.channels = 0, .emb_dim = 0, .att_channels = 128, .se_channels = 128};
    c.visual_channels = 256;
    c.margin = 0.2, c.scale = 30;
    c.seed = 1234;
    c.invariant_group = 1;
    c.contrastive_weight = 1.0, c.contrastive_scale = 10.0, c.per_speaker = 2;
    // DINO: the head and temperatures of Caron et al. 2021, as WeSpeaker's and 3D-Speaker's
    // speaker recipes keep them.
    c.views = 1, c.global_views = 2;
    c.dino_hidden = 2048, c.dino_bottleneck = 256, c.dino_out = 65536;
    c.student_temp = 0.1, c.teacher_temp = 0.04, c.teacher_temp_start = 0.04, c.teacher_temp_epochs = 0;
    c.centre_momentum = 0.9, c.ema_start = 0.996, c.freeze_last_layer = 1;
    snprintf(c.loss, sizeof c.loss, "aam");
    snprintf(c.name, sizeof c.name, "%s", name);
    snprintf(c.precision, sizeof c.precision, "fp32");
    snprintf(c.conv_algorithm, sizeof c.conv_algorithm, "auto");
    snprintf(c.invariant_bn, sizeof c.invariant_bn, "global");
    return c;
}

int model_config_apply_tf32(model_config_t *c, int tf32) {
    if (!tf32) return 0;
    if (strcmp(c->precision, "bf16") == 0) return -1;
    snprintf(c->precision, sizeof c->precision, "tf32");
    return 0;
}
