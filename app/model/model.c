#include "app/model/model_impl.h"

#include "kernels/base/check.h"
#include "kernels/base/spk_assert.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

float *model_buf(const model_t *m, size_t n) { return m->be->alloc((n ? n : 1) * sizeof(float)); }

void model_buf_free(const model_t *m, float **p) {
    m->be->free(*p);
    *p = NULL;
}

spk_bf16 *model_buf_bf16(const model_t *m, size_t n) { return m->be->alloc((n ? n : 1) * sizeof(spk_bf16)); }

void model_buf_bf16_free(const model_t *m, spk_bf16 **p) {
    m->be->free(*p);
    *p = NULL;
}

void model_round_params(model_t *m) {
    if (m->bf16) m->be->bf16_from_f32(m->params_bf16, m->params, (size_t)m->table.total);
}

void model_stage_begin(model_t *m, size_t bytes) {
    SPK_ASSERT(m->stats_pending <= 1);  // the older pending step's slot is about to be reused
    m->be->staging_begin(m->staging, bytes + 4 * SPK_STAGING_ALIGN);
}

const void *model_stage(model_t *m, const void *host, size_t bytes) {
    return m->be->staging_put(m->staging, host, bytes);
}

void model_stage_ready(model_t *m) { m->be->staging_ready(m->staging); }

_Static_assert(sizeof(int) == sizeof(float), "the correct count shares the loss's float buffer");

void model_stats_fetch(model_t *m, const float *scalars, int n) {
    SPK_ASSERT(m->stats_pending <= 1);
    m->be->staging_fetch(m->staging, scalars, 2 * sizeof(float));
    // The invariant mode's loss is the exact sum model_sum_losses left, read now (the mode
    // waits for the device within every step anyway), before the next step overwrites it.
    if (m->invariant) m->stats_loss[m->stats_pending] = model_loss_sum(m);
    m->stats_n[m->stats_pending++] = n;
}

int model_read_stats(model_t *m, step_stats_t *st) {
    if (m->stats_pending == 0) return 0;
    const float *v = m->be->staging_fetched(m->staging, m->stats_pending - 1);
    int correct;
    memcpy(&correct, &v[1], sizeof correct);
    const int n = m->stats_n[0];
    if (m->invariant)
        xsum_merge(xsum_cell(&st->loss_exact), xsum_cell(&m->stats_loss[0]), 1);
    else
        st->loss_sum += (double)v[0] * n;
    st->correct += correct;
    st->count += n;
    m->stats_n[0] = m->stats_n[1];
    m->stats_loss[0] = m->stats_loss[1];
    m->stats_pending--;
    return 1;
}

xsum_t model_xsum(const model_t *m, int64_t n) { return xsum_layout(m->be->alloc(xsum_bytes(n)), n); }

void model_xsum_free(const model_t *m, xsum_t *s) {
    if (s->bin) m->be->free(s->bin);
    *s = xsum_none();
}

// This node's memory: physical memory, or the cgroup's limit when that is lower.
static double node_memory_bytes(void) {
    double bytes = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGE_SIZE);
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");  // "max" when unlimited
    double limit;
    if (f && fscanf(f, "%lf", &limit) == 1 && limit > 0 && limit < bytes) bytes = limit;
    if (f) fclose(f);
    return bytes;
}

// With overcommit a too-large calloc succeeds and the kernel kills the rank when the
// initialisation touches the pages, without a word. Every rank reaches the same verdict.
static void check_param_memory(const model_t *m, const model_data_t *d) {
    const double copies = (double)(d->param_copies > 0 ? d->param_copies : 2);
    const double ranks = (double)(d->ranks_per_node > 0 ? d->ranks_per_node : 1);
    const double need = (double)m->table.total * sizeof(float) * copies * ranks, have = node_memory_bytes();
    if (need <= have) return;
    const param_tensor_t *big = &m->table.t[0];
    for (int i = 1; i < m->table.count; i++) big = m->table.t[i].numel > big->numel ? &m->table.t[i] : big;
    spk_fail_all(SPK_EXIT_FAILURE,
                 "model %s: %lld parameters (the largest, '%s', %lld for %lld speakers of %s) need %.1f GiB as %.0f "
                 "copies (parameters, gradients, optimizer) for each of %.0f rank(s) on this node, which has %.1f GiB",
                 m->name, (long long)m->table.total, big->name, (long long)big->numel, (long long)m->num_classes,
                 d->source ? d->source : "the data", need / 1073741824.0, copies, ranks, have / 1073741824.0);
}

void model_alloc_buffers(model_t *m, const model_data_t *data) {
    check_param_memory(m, data);
    m->params = model_buf(m, (size_t)m->table.total);
    m->grads = model_buf(m, (size_t)m->table.total);
    m->state = model_buf(m, (size_t)m->state_table.total);
    if (m->bf16) m->params_bf16 = model_buf_bf16(m, (size_t)m->table.total);
    if (m->invariant) {
        m->xgrads = model_xsum(m, m->table.total);
        m->xcells = model_xsum(m, 2);
        m->fcells = model_buf(m, 1);
    }
    if (m->be->separate_memory) {
        m->host_params = callocCheck((size_t)m->table.total + 1, sizeof(float));
        m->host_state = callocCheck((size_t)m->state_table.total + 1, sizeof(float));
    } else {
        m->host_params = m->params;
        m->host_state = m->state;
    }
}

void model_upload(model_t *m) {
    if (!m->be->separate_memory) return;
    m->be->upload(m->params, m->host_params, (size_t)m->table.total * sizeof(float));
    m->be->upload(m->state, m->host_state, (size_t)m->state_table.total * sizeof(float));
}

void model_download(model_t *m) {
    if (!m->be->separate_memory) return;
    m->be->download(m->host_params, m->params, (size_t)m->table.total * sizeof(float));
    m->be->download(m->host_state, m->state, (size_t)m->state_table.total * sizeof(float));
}

void model_zero_grads(model_t *m) {
    m->be->vec_zero(m->grads, (size_t)m->table.total);
    if (m->invariant) m->be->xsum_zero(m->xgrads, m->table.total);
}

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

model_t *model_create(const model_config_t *cfg, const model_data_t *data, const spk_backend_t *be) {
    model_t *m = callocCheck(1, sizeof *m);
    snprintf(m->name, sizeof m->name, "%.31s", cfg->name);
    m->bf16 = strcmp(cfg->precision, "bf16") == 0;
    m->invariant = cfg->invariant;
    SPK_ASSERT(!(m->bf16 && m->invariant));  // refused as a usage error (app/cli/train_options.c)
    m->group = cfg->invariant && cfg->invariant_group > 1 ? (int)cfg->invariant_group : 1;
    m->be = cfg->invariant ? spk_backend_invariant(be) : be;
    m->feature_dim = data->feature_dim;
    m->num_classes = data->num_classes;
    m->visual_dim = data->visual_dim;
    m->visual_ratio = data->visual_ratio;
    m->staging = be->staging_create();
    if (strcmp(cfg->name, "linear") == 0)
        model_linear_build(m, cfg, data);
    else if (strcmp(cfg->name, "ecapa") == 0 || strcmp(cfg->name, "ecapa-av") == 0)
        model_ecapa_build(m, cfg, data);
    else
        spk_fail_all(SPK_EXIT_USAGE, "unknown model '%s'", cfg->name);
    model_upload(m);
    return m;
}

void model_free(model_t *m) {
    if (!m) return;
    if (m->ops && m->ops->free_impl) m->ops->free_impl(m);
    param_table_free(&m->table);
    param_table_free(&m->state_table);
    if (m->be->separate_memory) {
        free(m->host_params);
        free(m->host_state);
    }
    model_buf_free(m, &m->params);
    model_buf_free(m, &m->grads);
    model_buf_free(m, &m->state);
    model_buf_bf16_free(m, &m->params_bf16);
    model_xsum_free(m, &m->xgrads);
    model_xsum_free(m, &m->xcells);
    model_xsum_free(m, &m->xstats);
    model_buf_free(m, &m->fcells);
    m->be->staging_free(m->staging);
    free(m);
}
