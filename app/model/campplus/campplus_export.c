// CAM++ in its toolkit's terms (app/model/campplus/campplus_export.h).
#include "app/model/campplus/campplus_export.h"

#include "app/model/campplus/campplus.h"

#include <stdio.h>

int campplus_speakerlab_args(const model_t *m, char *args, size_t cap) {
    const campplus_t *c = m->impl;
    const campp_dims_t *d = &c->d;
    snprintf(args, cap,
             "{\"feat_dim\": %lld, \"embedding_size\": %lld, \"growth_rate\": %d, \"bn_size\": %d, "
             "\"init_channels\": %lld}",
             (long long)d->feat, (long long)d->emb, d->growth, d->bn_size, (long long)d->channels);
    return 0;
}
