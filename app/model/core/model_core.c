// The core's buffers (app/model/core/model_core.h): the parameters, gradients, state and their
// host copies, the bf16 copy and the exact sums, checked against the node's memory first.
#include "app/model/core/model_core.h"

#include "kernels/base/check.h"
#include "kernels/base/env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

float *model_buf(const model_t *m, size_t n) { return m->be->alloc((n ? n : 1) * sizeof(float)); }

void model_buf_free(const model_t *m, float **p) {
    m->be->free(*p);
    *p = NULL;
}

void model_bufs_free(const model_t *m, float **const *bufs, size_t n) {
    for (size_t i = 0; i < n; i++) model_buf_free(m, bufs[i]);
}

spk_bf16 *model_buf_bf16(const model_t *m, size_t n) { return m->be->alloc((n ? n : 1) * sizeof(spk_bf16)); }

void model_buf_bf16_free(const model_t *m, spk_bf16 **p) {
    m->be->free(*p);
    *p = NULL;
}

void model_round_params(model_t *m) {
    if (m->bf16) m->be->bf16_from_f32(m->params_bf16, m->params, (size_t)m->table.total);
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

// MODEL_TEACHER "<name>" state tensors: a copy of every parameter, then of every state tensor.
static void register_teacher(model_t *m) {
    char name[PARAM_NAME_MAX + 16];
    const int np = m->table.count, ns = m->state_table.count;
    m->teacher_state_n = m->state_table.total;
    for (int k = 0; k < 2; k++) {
        const param_table_t *t = k ? &m->state_table : &m->table;
        const int n = k ? ns : np;
        for (int i = 0; i < n; i++) {
            const param_tensor_t x = t->t[i];  // (adding to the state table may move its entries)
            snprintf(name, sizeof name, MODEL_TEACHER "%s", x.name);
            if (strlen(name) >= PARAM_NAME_MAX)
                spk_die(SPK_EXIT_FAILURE, "the teacher's name for tensor %s is too long", x.name);
            const int64_t off = param_table_add(&m->state_table, name, x.ndim, x.shape);
            if (i == 0) *(k ? &m->teacher_state : &m->teacher_params) = off;
        }
    }
}

void model_use_teacher(model_t *m) {
    if (!m->teacher) return;
    memcpy(m->host_params, m->host_state + m->teacher_params, (size_t)m->table.total * sizeof(float));
    memcpy(m->host_state, m->host_state + m->teacher_state, (size_t)m->teacher_state_n * sizeof(float));
}

void model_alloc_buffers(model_t *m, const model_data_t *data) {
    if (m->teacher) register_teacher(m);
    check_param_memory(m, data);
    m->params = model_buf(m, (size_t)m->table.total);
    m->grads = model_buf(m, (size_t)m->table.total);
    m->state = model_buf(m, (size_t)m->state_table.total);
    if (m->bf16) m->params_bf16 = model_buf_bf16(m, (size_t)m->table.total);
    if (m->invariant) {
        m->xgrads = m->xgrads_full = model_xsum(m, m->table.total);
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

void model_plan_update(model_t *m, int64_t samples, int ranks) {
    // A teacher's passes (DINO) take several views of a sample, each its own terms: not counted.
    // A sample's visual frames, its crop's (whole utterances: not bounded), may each be a picture.
    const int64_t frames = !m->input.visual                           ? 1
                           : m->input.crop > 0 && m->visual_ratio > 0 ? m->input.crop / m->visual_ratio
                                                                      : 0;
    const int64_t per_rank = (samples + ranks - 1) / ranks;  // (the sampler gives every rank as many)
    m->exact_terms = m->invariant && !m->teacher && frames ? (samples * frames + m->group - 1) / m->group : 0;
    m->exact_rank_terms = m->exact_terms ? (per_rank * frames + m->group - 1) / m->group : 0;
}

// The gradient sums' form for this update, the most compact it allows in host memory, where the
// CPU's kernels deposit into them (SPKDDP_EXACT_SUMS=words or full forces a fuller one: the
// tests' comparison of the forms, the same bits):
//   terms (4 bytes a sum)  every sum takes one float term on this rank and at most 32 in all:
//                          this rank's samples are one group, BatchNorm's terms are floats
//                          (BatchNorm by groups on the default kernels; the global mode's are
//                          doubles), and no sharded classifier merges other ranks' sums in;
//   words (8)              every sum takes at most 32 terms in all;
//   full (17)              otherwise.
static xsum_t grad_sums(const model_t *m) {
    const int form = spk_env_choice("SPKDDP_EXACT_SUMS", "terms|words|full");
    const int words = m->exact_terms >= 1 && m->exact_terms <= 32 && !m->be->separate_memory && form != 2;
    const int terms = words && m->exact_rank_terms == 1 && model_bn_by_default_kernels(m) &&
                      m->head_rows == m->num_classes && form < 1;  // (unset: -1)
    return terms   ? xsum_ones((float *)(void *)m->xgrads_full.bin)
           : words ? xsum_words((uint64_t *)(void *)m->xgrads_full.bin)
                   : m->xgrads_full;
}

int model_bn_by_default_kernels(const model_t *m) { return m->bn_by_group && m->be->bn_fixed_order; }

void model_zero_grads(model_t *m) {
    m->be->vec_zero(m->grads, (size_t)m->table.total);
    if (!m->invariant) return;
    m->xgrads = grad_sums(m);
    m->be->xsum_zero(m->xgrads, m->table.total);
}

void model_free_buffers(model_t *m) {
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
    model_xsum_free(m, &m->xgrads_full);
    m->xgrads = xsum_none();
    model_xsum_free(m, &m->xcells);
    model_xsum_free(m, &m->xstats);
    model_buf_free(m, &m->fcells);
    m->be->staging_free(m->staging);
}
