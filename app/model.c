#include "app/model.h"

#include "app/check.h"

#include <stdlib.h>
#include <string.h>

void model_alloc_buffers(model_t *m) {
    m->params = callocCheck((size_t)m->table.total, sizeof(float));
    m->grads = callocCheck((size_t)m->table.total, sizeof(float));
    m->state = callocCheck((size_t)m->state_table.total, sizeof(float));
}

model_t *model_create(const train_config_t *cfg, const model_data_t *data) {
    model_t *m = callocCheck(1, sizeof *m);
    snprintf(m->name, sizeof m->name, "%.31s", cfg->model);
    m->feature_dim = data->feature_dim;
    m->num_classes = data->num_classes;
    m->visual_dim = data->visual_dim;
    m->visual_ratio = data->visual_ratio;
    if (strcmp(cfg->model, "linear") == 0) model_linear_build(m, cfg);
    else if (strcmp(cfg->model, "ecapa") == 0 || strcmp(cfg->model, "ecapa-av") == 0) model_ecapa_build(m, cfg);
    else spk_fail_all(SPK_EXIT_USAGE, "train: unknown --model '%s'", cfg->model);
    return m;
}

void model_free(model_t *m) {
    if (!m) return;
    if (m->ops && m->ops->free_impl) m->ops->free_impl(m);
    param_table_free(&m->table);
    param_table_free(&m->state_table);
    free(m->params);
    free(m->grads);
    free(m->state);
    free(m);
}
