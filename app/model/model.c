// Models built by name through the registry (app/model/model.h, app/model/registry.h).
#include "app/model/model.h"

#include "app/model/registry.h"
#include "kernels/base/check.h"
#include "kernels/base/spk_assert.h"
#include "kernels/conv2d.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The CPU's 2-D convolutions (kernels/conv2d.h): Winograd for the ResNets, whose 3x3 layers are
// nearly all their work (the fp32 step 1.5x faster), and for CAM++, whose front end's are a third
// of it (1.1x); direct for the rest (the face encoder's pictures: not measured).
static void select_conv_algorithm(const model_config_t *cfg) {
    const char *a = cfg->conv_algorithm;
    const int automatic = !a[0] || strcmp(a, "auto") == 0;
    const int fits = strncmp(cfg->name, "resnet", 6) == 0 || strcmp(cfg->name, "campplus") == 0;
    const int winograd = strcmp(a, "winograd") == 0 || (automatic && fits);
    conv2d_set_algorithm(winograd ? CONV2D_ALGO_WINOGRAD : CONV2D_ALGO_DIRECT);
}

model_t *model_create(const model_config_t *given, const model_data_t *data, const spk_backend_t *be) {
    const model_config_t resolved = model_config_resolve(given), *cfg = &resolved;
    model_t *m = callocCheck(1, sizeof *m);
    snprintf(m->name, sizeof m->name, "%.31s", cfg->name);
    m->bf16 = strcmp(cfg->precision, "bf16") == 0;
    m->invariant = cfg->invariant;
    m->group = cfg->invariant && cfg->invariant_group > 1 ? (int)cfg->invariant_group : 1;
    m->bn_by_group = cfg->invariant && strcmp(cfg->invariant_bn, "group") == 0;
    m->be = cfg->invariant ? spk_backend_invariant(be) : be;
    m->feature_dim = data->feature_dim;
    m->num_classes = data->num_classes;
    m->head_first = data->class_rows > 0 ? data->class_first : 0;
    m->head_rows = data->class_rows > 0 ? data->class_rows : data->num_classes;
    SPK_ASSERT(m->head_first >= 0 && m->head_rows > 0 && m->head_first + m->head_rows <= m->num_classes);
    m->visual_dim = data->visual_dim;
    m->visual_ratio = data->visual_ratio;
    m->staging = be->staging_create();
    const model_family_t *f = model_family_find(cfg->name);
    if (!f) spk_fail_all(SPK_EXIT_USAGE, "unknown model '%s'", cfg->name);
    // (The DINO head has its own BatchNorm, over the global batch only.)
    if (m->bn_by_group && strcmp(cfg->loss, "dino") == 0)
        spk_fail_all(SPK_EXIT_USAGE,
                     "--invariant-bn group: --loss dino's projection head normalises over the global batch only; use "
                     "--invariant-bn global");
    select_conv_algorithm(cfg);
    f->build(m, cfg, data);
    if (m->bn_by_group && m->group < m->min_batch)
        spk_fail_all(SPK_EXIT_USAGE,
                     "--invariant-bn group normalises each --invariant-group of samples, and %s's BatchNorm needs at "
                     "least %d (have --invariant-group %d)",
                     cfg->name, m->min_batch, m->group);
    if (cfg->zero_init_residual && !m->residual_zeroed)
        spk_fail_all(SPK_EXIT_USAGE,
                     "--zero-init-residual: %s has no 2-D residual blocks (the ResNets, CAM++'s front end and the "
                     "face encoders have)",
                     cfg->name);
    if (m->ops && m->ops->finish) m->ops->finish(m);
    model_upload(m);
    return m;
}

int64_t model_unaveraged_head(const model_t *m) { return m->head_unused && !m->invariant ? m->table.t[0].numel : 0; }

void model_free(model_t *m) {
    if (!m) return;
    if (m->ops && m->ops->free_impl) m->ops->free_impl(m);
    free(m->impl);
    model_free_buffers(m);
    free(m);
}
