// CAM++ in its toolkit's terms: the keyword arguments of 3D-Speaker's class that rebuild it.
#pragma once
#include "app/model/core/model_core.h"

#include <stddef.h>

// speakerlab.models.campplus.DTDNN.CAMPPlus's keyword arguments as a JSON object (0), or -1 when
// the model has no counterpart there.
int campplus_speakerlab_args(const model_t *m, char *args, size_t cap);
