// The seed job's model (app/model/linear/linear.c): a linear classifier over the utterance's
// mean frame, whose embedding is that mean frame. The `linear` row of app/model/registry.c.
#pragma once
#include "app/model/core/model_core.h"

void model_linear_build(model_t *m, const model_config_t *cfg, const model_data_t *data);
