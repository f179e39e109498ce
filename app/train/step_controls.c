#include "app/train/step_controls.h"

#include "app/dist/exact_reduce.h"
#include "io/common/metrics.h"
#include "kernels/base/check.h"
#include "kernels/exact_sum_math.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void step_controls_init(step_controls_t *c, const step_controls_config_t *cfg, const spk_backend_t *be) {
    *c = (step_controls_t){.cfg = *cfg, .be = be, .ep_norm_max = 0};
    c->measure = cfg->clip_grad_norm > 0 || cfg->skip_nonfinite > 0 || cfg->log_every > 0 || !be->separate_memory;
    c->dev_norm = be->alloc(sizeof(double));
}

void step_controls_shard(step_controls_t *c, const comm_t *comm, int64_t own, int64_t block) {
    c->comm = comm;
    c->own = own;
    c->block = block;
}

void step_controls_free(step_controls_t *c) {
    if (c->dev_norm) c->be->free(c->dev_norm);
    if (c->dev_blocks) c->be->free(c->dev_blocks);
    free(c->blocks);
    c->dev_norm = c->dev_blocks = c->blocks = NULL;
}

// The head's sum of squares over every rank's slice from whole class blocks: each block's in
// double (vec_sum_squares, fixed for its size), the blocks' added as exact sums.
static double head_squares_exact(step_controls_t *c, const float *grads) {
    const int64_t n = (c->own + c->block - 1) / c->block;
    if (n > c->cap_blocks) {
        if (c->dev_blocks) c->be->free(c->dev_blocks);
        free(c->blocks);
        c->dev_blocks = c->be->alloc((size_t)n * sizeof(double));
        c->blocks = mallocCheck((size_t)n * sizeof(double));
        c->cap_blocks = n;
    }
    for (int64_t b = 0; b < n; b++) {
        const int64_t off = b * c->block, len = c->own - off < c->block ? c->own - off : c->block;
        c->be->vec_sum_squares(c->dev_blocks + b, grads + off, (size_t)len);
    }
    c->be->download(c->blocks, c->dev_blocks, (size_t)n * sizeof(double));
    xsum_cell_t cell = {0};
    int J = 0;
    for (int64_t b = 0; b < n; b++) xsum_deposit(&J, &cell.hi, &cell.lo, c->blocks[b]);
    cell.bin = (int8_t)J;
    exact_allreduce_host(c->comm, xsum_cell(&cell), 1);
    return xsum_value_of(xsum_cell(&cell), 0);
}

static const char *what_number(double x) { return isnan(x) ? "NaN" : "infinite"; }

// A number for a message: %g, or NaN / inf / -inf however the C library spells them.
static const char *show(double x, char *buf, size_t cap) {
    if (isnan(x)) return "NaN";
    if (isinf(x)) return x > 0 ? "inf" : "-inf";
    snprintf(buf, cap, "%g", x);
    return buf;
}

int step_controls_apply(step_controls_t *c, float *grads, int64_t n, step_report_t *r, int64_t epoch,
                        int64_t global_step) {
    double sq, head = 0.0;
    c->be->vec_sum_squares(c->dev_norm, grads + c->own, (size_t)(n - c->own));
    c->be->download(&sq, c->dev_norm, sizeof sq);
    if (c->own > 0 && c->block > 0) {
        head = head_squares_exact(c, grads);
    } else if (c->own > 0) {  // every rank's slice of the head
        c->be->vec_sum_squares(c->dev_norm, grads, (size_t)c->own);
        c->be->download(&head, c->dev_norm, sizeof head);
        comm_allreduce_sum_f64(c->comm, &head, 1);
    }
    sq += head;
    r->grad_norm = sqrt(sq);
    r->clip_scale = 1.0;
    r->skipped = 0;
    const int bad_loss = !isfinite(r->loss), bad_grad = !isfinite(r->grad_norm);
    if (bad_loss || bad_grad) {
        const long long e = (long long)epoch + 1, s = (long long)global_step + 1;
        if (c->skipped >= c->cfg.skip_nonfinite) {
            const char *used = c->cfg.skip_nonfinite > 0 ? "; the updates --skip-nonfinite allows are used up" : "";
            if (bad_loss)
                spk_fail_all(SPK_EXIT_NUMERIC, "loss is %s at epoch %lld, global step %lld; " NONFINITE_ADVICE "%s",
                             what_number(r->loss), e, s, c->cfg.data, used);
            spk_fail_all(SPK_EXIT_NUMERIC,
                         "gradient norm is %s at epoch %lld, global step %lld (the loss is finite); " NONFINITE_ADVICE
                         "%s",
                         what_number(r->grad_norm), e, s, c->cfg.data, used);
        }
        c->skipped++;
        c->ep_skipped++;
        r->skipped = 1;
        char a[32], b[32];
        printf0("epoch %lld, global step %lld: loss %s, gradient norm %s: update skipped (%lld of at most %lld)\n", e,
                s, show(r->loss, a, sizeof a), show(r->grad_norm, b, sizeof b), (long long)c->skipped,
                (long long)c->cfg.skip_nonfinite);
        return 0;
    }
    c->ep_norm_sum += r->grad_norm;
    if (r->grad_norm > c->ep_norm_max) c->ep_norm_max = r->grad_norm;
    const double clip = c->cfg.clip_grad_norm;
    if (clip > 0 && r->grad_norm > clip) {
        r->clip_scale = clip / (r->grad_norm + 1e-6);
        c->be->vec_scale(grads, (float)r->clip_scale, (size_t)n);
    }
    return 1;
}

void step_controls_log(const step_controls_t *c, const step_report_t *r, int64_t epoch, int64_t global_step, double lr,
                       int64_t samples, double seconds, double data_wait) {
    const int64_t every = c->cfg.log_every;
    if (every <= 0 || (global_step + 1) % every != 0 || spk_rank() != 0) return;
    json_line_t j;
    json_begin(&j);
    json_int(&j, "global_step", global_step + 1);
    json_int(&j, "epoch", epoch + 1);
    json_num(&j, "loss", r->loss);
    json_num(&j, "accuracy", r->accuracy);
    json_num(&j, "lr", lr);
    json_num(&j, "grad_norm", r->grad_norm);
    json_num(&j, "clip_scale", r->clip_scale);
    json_int(&j, "skipped", r->skipped);
    json_int(&j, "samples", samples);
    json_num(&j, "step_seconds", seconds);
    json_num(&j, "data_wait_s", data_wait);
    json_end(&j);
    if (c->cfg.step_log[0])
        metrics_append(c->cfg.step_log, &j);
    else
        printf("%s\n", j.buf);
}

void step_controls_resume_log(const step_controls_t *c, int64_t global_step) {
    if (c->cfg.log_every > 0 && c->cfg.step_log[0] && spk_rank() == 0)
        metrics_truncate_after_step(c->cfg.step_log, global_step);
}

void step_controls_save(const step_controls_t *c, ckpt_meta_t *m) {
    m->ep_grad_norm_sum = c->ep_norm_sum;
    m->ep_grad_norm_max = c->ep_norm_max;
    m->ep_skipped = c->ep_skipped;
}

void step_controls_restore(step_controls_t *c, const ckpt_meta_t *m) {
    c->ep_norm_sum = m->ep_grad_norm_sum;
    c->ep_norm_max = m->ep_grad_norm_max;
    c->ep_skipped = m->ep_skipped;
}

void step_controls_new_epoch(step_controls_t *c) {
    c->ep_norm_sum = c->ep_norm_max = 0.0;
    c->ep_skipped = 0;
}

double step_controls_epoch_norm(const step_controls_t *c, int64_t updates) {
    const int64_t applied = updates - c->ep_skipped;
    return c->measure && applied > 0 ? c->ep_norm_sum / (double)applied : NAN;
}
