// The world-size-invariant mode's convolutions on oneDNN (kernels/cpu/conv2d_dnnl_fixed.h).
#include "kernels/cpu/conv2d_dnnl_fixed.h"

#ifdef SPK_USE_DNNL
#include <omp.h>
#include <stdint.h>

#include "kernels/base/spk_assert.h"
#include "kernels/cpu/conv2d_dnnl_plan.h"

// Plans of one sample, made and run with the OpenMP ICV at 1: oneDNN plans a primitive's kernels
// for the threads it may use when it makes it, and may split a sample's sums between them. At 1,
// and for B = 1, a sample's result depends on neither the batch nor the thread count. Threads
// take samples, each with a stream and a slot of the workspace of its own, and set their own ICV
// to 1 (the caller's is as it was). Winograd where asked for and oneDNN has it, as the default
// plans; channels-last direct convolutions elsewhere (no blocked ones), none where oneDNN would
// run its reference loops.

// The fixed plan of one sample of s, looked up (and made) at the ICV of 1.
static const plan_t *fixed_plan_at_one(const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a) {
    SPK_ASSERT(t != CONV2D_BF16_OUT);
    conv2d_shape_t one = *s;
    one.B = 1;
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const plan_t *p = plan_lookup(&one, t, a, 1, 1);
    omp_set_num_threads(threads);
    return p;
}

int conv2d_dnnl_fixed_usable(const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a) {
    return conv2d_dnnl_usable(t) && !fixed_plan_at_one(s, t, a)->none;
}

// [weights in the forward's format][in the backward's][the phases' (phased plans)][per-sample
// weight gradients (threads), a group's running sum, both in the primitive's format][that sum in
// PyTorch's layout][one slot per thread].
typedef struct {
    char *w_fwd, *w_bwd, *phase_w;
    float *rows, *sum, *oihw;
    char *slots;
    size_t slot;
} fixed_parts_t;

// A thread's slot: oneDNN's scratchpad, one sample's input gradient to be added (channels-last
// plans) or its phases' outputs (phased ones), its x or dx and its y or dy in the plan's blocked
// layout (Winograd's).
typedef struct {
    char *scratch, *dx, *xb, *yb;
} slot_t;

static size_t fixed_slot_bytes(const plan_t *p) { return p->scratch_bytes + p->dx_bytes + p->xb_bytes + p->yb_bytes; }

// Samples whose weight gradients are made before they are added to their group's sum: at least
// WAVE_ROWS, so the sum is read and written once for that many (one thread, one row a time: the
// sum's passes were 5% of ResNet34's step). Their order of addition is the samples' whatever the
// wave, so the bits do not depend on it.
#define WAVE_ROWS 8

static int wave_rows(int threads) { return threads > WAVE_ROWS ? threads : WAVE_ROWS; }

static size_t rows_bytes(const plan_t *p, const conv2d_shape_t *s, int threads) {
    return ((size_t)wave_rows(threads) + 1) * p->dw_bytes + plan_up(conv2d_w_size(s) * sizeof(float));
}

static fixed_parts_t fixed_parts_of(const plan_t *p, const conv2d_shape_t *s, int threads, void *workspace) {
    char *b = (char *)workspace + (CONV2D_PLAN_ALIGN - (uintptr_t)workspace % CONV2D_PLAN_ALIGN) % CONV2D_PLAN_ALIGN;
    fixed_parts_t q;
    q.w_fwd = b, b += p->w_fwd_bytes;
    q.w_bwd = b, b += p->w_bwd_bytes;
    q.phase_w = b, b += p->phase_w_bytes;
    const size_t rows = (size_t)wave_rows(threads);
    q.rows = (float *)b, q.sum = (float *)(b + rows * p->dw_bytes);
    q.oihw = (float *)(b + (rows + 1) * p->dw_bytes), b += rows_bytes(p, s, threads);
    q.slots = b, q.slot = fixed_slot_bytes(p);
    return q;
}

// The slot of the calling thread, whose ICV it sets to 1: oneDNN reads it as it runs, and opens
// no team of its own inside this one.
static slot_t my_slot(const plan_t *p, const fixed_parts_t *q) {
    omp_set_num_threads(1);
    slot_t t;
    t.scratch = q->slots + (size_t)omp_get_thread_num() * q->slot;
    t.dx = t.scratch + p->scratch_bytes;
    t.xb = t.dx + p->dx_bytes;
    t.yb = t.xb + p->xb_bytes;
    return t;
}

static size_t fixed_bytes(const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a) {
    const plan_t *p = fixed_plan_at_one(s, t, a);
    const int threads = omp_get_max_threads();
    return p->none ? 0
                   : CONV2D_PLAN_ALIGN + p->w_fwd_bytes + p->w_bwd_bytes + p->phase_w_bytes +
                         rows_bytes(p, s, threads) + (size_t)threads * fixed_slot_bytes(p);
}

// Enough for either algorithm (as conv2d_dnnl_workspace_bytes).
size_t conv2d_dnnl_fixed_workspace_bytes(const conv2d_shape_t *s, conv2d_operands t) {
    const size_t direct = fixed_bytes(s, t, CONV2D_ALGO_DIRECT);
    if (plan_algorithm(s, t, CONV2D_ALGO_WINOGRAD) == CONV2D_ALGO_DIRECT) return direct;
    const size_t winograd = fixed_bytes(s, t, CONV2D_ALGO_WINOGRAD);
    return direct > winograd ? direct : winograd;
}

static size_t operand_bytes(conv2d_operands t) { return t == CONV2D_F32 ? sizeof(float) : sizeof(uint16_t); }

// One sample's passes on stream st, its channels-last operands reordered to and from the plan's
// layout where it has its own.
static void sample_forward(const plan_t *p, dnnl_stream_t st, slot_t sl, const void *x, const void *wf,
                           const float *bias, void *y) {
    const void *cx = plan_reordered(st, p->x_in, p, p->x, p->cx, x, sl.xb, sl.scratch);
    void *cy = p->y_out ? (void *)sl.yb : y;
    if (bias)
        plan_run_on(st, p->fwd_bias, p, sl.scratch, 4,
                    (int[]){DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST},
                    (spk_cmd[]){p->cx, p->w_fwd, p->bias, p->cy}, (void *[]){(void *)cx, (void *)wf, (void *)bias, cy});
    else
        plan_run_on(st, p->fwd, p, sl.scratch, 3, (int[]){DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
                    (spk_cmd[]){p->cx, p->w_fwd, p->cy}, (void *[]){(void *)cx, (void *)wf, cy});
    plan_reordered(st, p->y_out, p, p->cy, p->y, cy, y, sl.scratch);
}

static void sample_input_grad(const plan_t *p, dnnl_stream_t st, slot_t sl, float *dx, int accumulate, const void *dy,
                              const void *wb, size_t nx) {
    const void *cdy = plan_reordered(st, p->dy_in, p, p->dy, p->cdy, dy, sl.yb, sl.scratch);
    const int blocked = p->dx_out != NULL;
    void *out = blocked ? (void *)sl.xb : accumulate ? (void *)sl.dx : dx;
    plan_run_on(st, p->bwd_data, p, sl.scratch, 3, (int[]){DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},
                (spk_cmd[]){p->cdy, p->w_bwd, p->cdx}, (void *[]){(void *)cdy, (void *)wb, out});
    if (blocked) {
        plan_reordered(st, accumulate ? p->dx_add : p->dx_out, p, p->cdx, p->dx, out, dx, sl.scratch);
    } else if (accumulate) {
        const float *part = out;
#pragma omp simd
        for (size_t k = 0; k < nx; k++) dx[k] += part[k];
    }
}

// dw (the primitive's format) = the sample's weight gradient.
static void sample_weight_grad(const plan_t *p, dnnl_stream_t st, slot_t sl, float *dw, const void *dy, const void *x) {
    const void *cdy = plan_reordered(st, p->dy_in, p, p->dy, p->cdy, dy, sl.yb, sl.scratch);
    const void *cx = plan_reordered(st, p->x_in, p, p->x, p->cx, x, sl.xb, sl.scratch);
    plan_run_on(st, p->bwd_weights, p, sl.scratch, 3, (int[]){DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS},
                (spk_cmd[]){p->cx, p->cdy, p->dw_prim}, (void *[]){(void *)cx, (void *)cdy, dw});
}

void conv2d_dnnl_forward_fixed(float *y, const void *x, const void *w, const float *bias, const conv2d_shape_t *s,
                               conv2d_operands t, conv2d_algorithm a, void *workspace) {
    const int threads = omp_get_max_threads();
    const plan_t *p = fixed_plan_at_one(s, t, a);
    SPK_ASSERT(!p->none);
    omp_set_num_threads(1);  // (the forward's primitive is made at the plan's ICV too)
    plan_forward_ready(p, bias != NULL);
    omp_set_num_threads(threads);
    dnnl_stream_t *st = plan_thread_streams(threads);
    const fixed_parts_t q = fixed_parts_of(p, s, threads, workspace);
    const void *wf = plan_reordered(NULL, p->w_to_fwd, p, p->w_oihw, p->w_fwd, w, q.w_fwd, q.slots);
    const size_t xs = (size_t)s->H * s->W * s->Cin * operand_bytes(t),
                 ys = (size_t)conv2d_out_h(s) * conv2d_out_w(s) * s->Cout;
#pragma omp parallel for schedule(dynamic, 1)
    for (int b = 0; b < s->B; b++)
        sample_forward(p, st[omp_get_thread_num()], my_slot(p, &q), (const char *)x + b * xs, wf, bias, y + b * ys);
}

// rows[i] = sample b0 + i's weight gradient in the primitive's format, for i < n (threads over i).
static void weight_grads(const plan_t *p, dnnl_stream_t *st, const fixed_parts_t *q, int b0, int n, const void *dy,
                         const void *x, const conv2d_shape_t *s, conv2d_operands t) {
    const size_t xs = (size_t)s->H * s->W * s->Cin * operand_bytes(t),
                 ys = (size_t)conv2d_out_h(s) * conv2d_out_w(s) * s->Cout * operand_bytes(t);
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < n; i++)
        sample_weight_grad(p, st[omp_get_thread_num()], my_slot(p, q), q->rows + i * p->dw_bytes / sizeof(float),
                           (const char *)dy + (b0 + i) * ys, (const char *)x + (b0 + i) * xs);
}

// dw += each group's term: its samples' weight gradients, wave_rows at a time (whole groups,
// or a group in parts), added in order into the group's running sum in the primitive's format
// (as xsum_add adds a group's rows: the thread count does not show), reordered to PyTorch's
// layout once a group is complete (a permutation: the same values).
static void weight_grads_exact(xsum_t dw, const plan_t *p, dnnl_stream_t *st, const fixed_parts_t *q, int threads,
                               const void *dy, const void *x, const conv2d_shape_t *s, conv2d_operands t, int group) {
    const size_t len = p->dw_bytes / sizeof(float);  // (padded where the format pads)
    const int rows = wave_rows(threads), wave = group <= rows ? rows / group * group : rows;
    float *sum = q->sum;
    for (int b0 = 0; b0 < s->B;) {
        const int left = group <= rows ? s->B - b0 : group - b0 % group;
        const int n = left < wave ? left : wave;
        weight_grads(p, st, q, b0, n, dy, x, s, t);
        for (int i = 0; i < n;) {  // each group's samples in this wave: i .. i + m
            const int b = b0 + i, first = b % group == 0, m = n - i < group - b % group ? n - i : group - b % group;
            const float *r = q->rows + i * len, *term = sum;
            if (group == 1)  // the sample is the term
                term = r;
            else
#pragma omp parallel for simd schedule(static)
                for (size_t k = 0; k < len; k++) {
                    float v = first ? r[k] : sum[k];
                    for (int j = first; j < m; j++) v += r[j * len + k];
                    sum[k] = v;
                }
            if ((b + m) % group == 0)
                xsum_add(dw, plan_reordered(NULL, p->dw_out, p, p->dw_prim, p->dw_oihw, term, q->oihw, q->slots), 1,
                         (int64_t)conv2d_w_size(s), 1);
            i += m;
        }
        b0 += n;
    }
}

void conv2d_dnnl_backward_exact(float *dx, int accumulate, xsum_t dw, const void *dy, const void *x, const void *w,
                                const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a, int group,
                                void *workspace) {
    SPK_ASSERT(group > 0 && s->B % group == 0);
    const int threads = omp_get_max_threads();
    const plan_t *p = fixed_plan_at_one(s, t, a);
    SPK_ASSERT(!p->none);
    omp_set_num_threads(1);  // (the backward's primitives are made at the plan's ICV too)
    plan_backward_ready(p);
    omp_set_num_threads(threads);
    dnnl_stream_t *st = plan_thread_streams(threads);
    const fixed_parts_t q = fixed_parts_of(p, s, threads, workspace);
    if (!xsum_empty(dw)) weight_grads_exact(dw, p, st, &q, threads, dy, x, s, t, group);
    if (!dx) return;
    const size_t xs = (size_t)s->H * s->W * s->Cin,
                 ys = (size_t)conv2d_out_h(s) * conv2d_out_w(s) * s->Cout * operand_bytes(t);
    if (p->phases) {  // (the phases' outputs in each thread's slot)
        conv2d_shape_t one = *s;
        one.B = 1;
        const void *wc[CONV2D_MAX_PHASES];
        plan_phase_weights(p, &one, w, q.phase_w, q.slots, wc);
#pragma omp parallel for schedule(dynamic, 1)
        for (int b = 0; b < s->B; b++) {
            const slot_t sl = my_slot(p, &q);
            plan_phases_run(st[omp_get_thread_num()], p, &one, dx + b * xs, accumulate, (const char *)dy + b * ys, wc,
                            sl.dx, sl.scratch);
        }
        return;
    }
    const void *wb = plan_reordered(NULL, p->w_to_bwd, p, p->w_oihw, p->w_bwd, w, q.w_bwd, q.slots);
#pragma omp parallel for schedule(dynamic, 1)
    for (int b = 0; b < s->B; b++)
        sample_input_grad(p, st[omp_get_thread_num()], my_slot(p, &q), dx + b * xs, accumulate,
                          (const char *)dy + b * ys, wb, xs);
}

#else  // built without oneDNN: kernels/cpu/conv2d.c runs its own convolution

int conv2d_dnnl_fixed_usable(const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a) {
    return (void)s, (void)t, (void)a, 0;
}
size_t conv2d_dnnl_fixed_workspace_bytes(const conv2d_shape_t *s, conv2d_operands t) { return (void)s, (void)t, 0; }
void conv2d_dnnl_forward_fixed(float *y, const void *x, const void *w, const float *bias, const conv2d_shape_t *s,
                               conv2d_operands t, conv2d_algorithm a, void *workspace) {
    (void)y, (void)x, (void)w, (void)bias, (void)s, (void)t, (void)a, (void)workspace;
}
void conv2d_dnnl_backward_exact(float *dx, int accumulate, xsum_t dw, const void *dy, const void *x, const void *w,
                                const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a, int group,
                                void *workspace) {
    (void)dx, (void)accumulate, (void)dw, (void)dy, (void)x, (void)w, (void)s, (void)t, (void)a, (void)group,
        (void)workspace;
}
#endif
