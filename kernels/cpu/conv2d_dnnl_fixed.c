// The world-size-invariant mode's convolutions on oneDNN (kernels/cpu/conv2d_dnnl_fixed.h).
#include "kernels/cpu/conv2d_dnnl_fixed.h"

#ifdef SPK_USE_DNNL
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "kernels/base/spk_assert.h"
#include "kernels/cpu/conv2d_dnnl_plan.h"
#include "kernels/cpu/group_terms.h"

// Plans of a block of samples, made and run with the OpenMP ICV at 1: oneDNN plans a primitive's
// kernels for the threads it may use when it makes it, and may split a sample's sums between them.
// At 1, a sample's result depends on the plan alone, whose block is a function of the shape: never
// of the batch or the thread count. Threads take blocks, each with a stream and a slot of the
// workspace of its own, and set their own ICV to 1 (the caller's is as it was). A block the batch
// leaves short is run padded with zero samples. Winograd where asked for and oneDNN has it, as the
// default plans; channels-last direct convolutions elsewhere (no blocked ones), none where oneDNN
// would run its reference loops.

// The samples a fixed plan takes: FIXED_BLOCK where a sample's output map has at most
// FIXED_BLOCK_PIXELS pixels, one elsewhere. On small maps a plan of one sample leaves oneDNN's
// kernels short of work (ResNet34's 256-channel 10 x 25 layers: 145 GFLOP/s against 284 for a
// batch of 16, one thread; blocks of 4 gained half of what 8 do); on large ones it is as fast or
// faster (a sample's maps stay in cache). The cost: a rank's threads beyond its blocks idle on
// the small maps (32 samples on 16 threads: 4 blocks).
// The weight gradient sums its blocks into their group's term, so its blocks are whole ones only
// where they tile the groups, else single samples (wgrad_block): a group of 1, the mode's
// default, is its sample alone.
#define FIXED_BLOCK        8
#define FIXED_BLOCK_PIXELS 1024

static int fixed_block(const conv2d_shape_t *s) {
    return conv2d_out_h(s) * conv2d_out_w(s) <= FIXED_BLOCK_PIXELS ? FIXED_BLOCK : 1;
}

static int wgrad_block(const conv2d_shape_t *s, int group) { return group % fixed_block(s) == 0 ? fixed_block(s) : 1; }

// The shape of a block of P samples of s.
static conv2d_shape_t block_shape(const conv2d_shape_t *s, int P) {
    conv2d_shape_t one = *s;
    one.B = P;
    return one;
}

// The fixed plan of blocks of P samples of s, looked up (and made) at the ICV of 1.
static const plan_t *fixed_plan_of(const conv2d_shape_t *s, int P, conv2d_operands t, conv2d_algorithm a) {
    const conv2d_shape_t one = block_shape(s, P);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const plan_t *p = plan_lookup(&one, t, a, 1, 1);
    omp_set_num_threads(threads);
    return p;
}

static const plan_t *fixed_plan(const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a) {
    return fixed_plan_of(s, fixed_block(s), t, a);
}

int conv2d_dnnl_fixed_usable(const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a) {
    return conv2d_dnnl_usable(t) && !fixed_plan(s, t, a)->none && !fixed_plan_of(s, 1, t, a)->none;
}

static size_t operand_bytes(conv2d_operands t) { return t == CONV2D_F32 ? sizeof(float) : sizeof(uint16_t); }

// A sample's x and y (or dx and dy) in the plan's operands and in float32, and its forward's
// output and input gradient (bf16 for CONV2D_BF16_OUT).
typedef struct {
    size_t x, y, xf, yf, yo, dxo;
} sample_bytes_t;

static sample_bytes_t sample_bytes(const conv2d_shape_t *s, conv2d_operands t) {
    const size_t nx = (size_t)s->H * s->W * s->Cin, ny = (size_t)conv2d_out_h(s) * conv2d_out_w(s) * s->Cout;
    const size_t out = t == CONV2D_BF16_OUT ? sizeof(uint16_t) : sizeof(float);
    return (sample_bytes_t){
        nx * operand_bytes(t), ny * operand_bytes(t), nx * sizeof(float), ny * sizeof(float), ny * out, nx * out};
}

// A short block's operands padded to a whole block, and its results, in a slot (none where the
// block is one sample).
static size_t stage_bytes(const conv2d_shape_t *s, conv2d_operands t) {
    const sample_bytes_t n = sample_bytes(s, t);
    return fixed_block(s) == 1 ? 0 : plan_up((size_t)fixed_block(s) * (n.xf > n.yf ? n.xf : n.yf));
}

// [weights in the forward's format][in the backward's][the phases' (phased plans)][the blocks'
// weight gradients (threads), a group's running sum, both in the primitive's format][that sum in
// PyTorch's layout][one slot per thread].
typedef struct {
    char *w_fwd, *w_bwd, *phase_w;
    float *rows, *sum, *oihw;
    char *slots;
    size_t slot, stage;
} fixed_parts_t;

// A thread's slot: oneDNN's scratchpad, one block's input gradient to be added (channels-last
// plans) or its phases' outputs (phased ones), its x or dx and its y or dy in the plan's blocked
// layout (Winograd's), and a short block's operands (in) and results (out) padded to a block.
typedef struct {
    char *scratch, *dx, *xb, *yb, *in, *out;
} slot_t;

static size_t fixed_slot_bytes(const plan_t *p, size_t stage) {
    return p->scratch_bytes + p->dx_bytes + p->xb_bytes + p->yb_bytes + 2 * stage;
}

// Blocks whose weight gradients are made before they are added to their group's sum: at least
// WAVE_ROWS, so the sum is read and written once for that many (one thread, one row a time: the
// sum's passes were 5% of ResNet34's step). Their order of addition is the blocks' whatever the
// wave, so the bits do not depend on it.
#define WAVE_ROWS 8

static int wave_rows(int threads) { return threads > WAVE_ROWS ? threads : WAVE_ROWS; }

static size_t rows_bytes(const plan_t *p, const conv2d_shape_t *s, int threads) {
    return ((size_t)wave_rows(threads) + 1) * p->dw_bytes + plan_up(conv2d_w_size(s) * sizeof(float));
}

static fixed_parts_t fixed_parts_of(const plan_t *p, const conv2d_shape_t *s, conv2d_operands t, int threads,
                                    void *workspace) {
    char *b = (char *)workspace + (CONV2D_PLAN_ALIGN - (uintptr_t)workspace % CONV2D_PLAN_ALIGN) % CONV2D_PLAN_ALIGN;
    fixed_parts_t q;
    q.w_fwd = b, b += p->w_fwd_bytes;
    q.w_bwd = b, b += p->w_bwd_bytes;
    q.phase_w = b, b += p->phase_w_bytes;
    const size_t rows = (size_t)wave_rows(threads);
    q.rows = (float *)b, q.sum = (float *)(b + rows * p->dw_bytes);
    q.oihw = (float *)(b + (rows + 1) * p->dw_bytes), b += rows_bytes(p, s, threads);
    q.stage = stage_bytes(s, t);
    q.slots = b, q.slot = fixed_slot_bytes(p, q.stage);
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
    t.in = t.yb + p->yb_bytes;
    t.out = t.in + q->stage;
    return t;
}

static size_t plan_bytes(const plan_t *p, const conv2d_shape_t *s, conv2d_operands t) {
    const int threads = omp_get_max_threads();
    return p->none ? 0
                   : CONV2D_PLAN_ALIGN + p->w_fwd_bytes + p->w_bwd_bytes + p->phase_w_bytes +
                         rows_bytes(p, s, threads) + (size_t)threads * fixed_slot_bytes(p, stage_bytes(s, t));
}

// Enough for the blocks' plan and for the weight gradient's of single samples.
static size_t fixed_bytes(const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a) {
    const size_t blocks = plan_bytes(fixed_plan(s, t, a), s, t);
    if (fixed_block(s) == 1) return blocks;
    const size_t one = plan_bytes(fixed_plan_of(s, 1, t, a), s, t);
    return blocks > one ? blocks : one;
}

// Enough for either algorithm (as conv2d_dnnl_workspace_bytes).
size_t conv2d_dnnl_fixed_workspace_bytes(const conv2d_shape_t *s, conv2d_operands t) {
    const size_t direct = fixed_bytes(s, t, CONV2D_ALGO_DIRECT);
    if (plan_algorithm(s, t, CONV2D_ALGO_WINOGRAD) == CONV2D_ALGO_DIRECT) return direct;
    const size_t winograd = fixed_bytes(s, t, CONV2D_ALGO_WINOGRAD);
    return direct > winograd ? direct : winograd;
}

// A block of the batch: its first sample and how many it has of the plan's P.
typedef struct {
    int b, n;
} block_t;

static block_t batch_block(const conv2d_shape_t *s, int i) {
    const int P = fixed_block(s), b = i * P;
    return (block_t){b, s->B - b < P ? s->B - b : P};
}

static int batch_blocks(const conv2d_shape_t *s) { return (s->B + fixed_block(s) - 1) / fixed_block(s); }

// The block's n samples of `bytes` each from src, or (a short block) them and zero samples after
// them in buf.
static const void *padded(char *buf, const void *src, block_t k, int P, size_t bytes) {
    if (k.n == P) return src;
    memcpy(buf, src, (size_t)k.n * bytes);
    memset(buf + (size_t)k.n * bytes, 0, (size_t)(P - k.n) * bytes);
    return buf;
}

// One block's passes on stream st, its channels-last operands reordered to and from the plan's
// layout where it has its own.
static void block_forward(const plan_t *p, dnnl_stream_t st, slot_t sl, const void *x, const void *wf,
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

static void block_input_grad(const plan_t *p, dnnl_stream_t st, slot_t sl, void *dx, int accumulate, const void *dy,
                             const void *wb, size_t nx) {
    const void *cdy = plan_reordered(st, p->dy_in, p, p->dy, p->cdy, dy, sl.yb, sl.scratch);
    const int blocked = p->dx_out != NULL;
    void *out = blocked ? (void *)sl.xb : accumulate ? (void *)sl.dx : dx;
    plan_run_on(st, p->bwd_data, p, sl.scratch, 3, (int[]){DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},
                (spk_cmd[]){p->cdy, p->w_bwd, p->cdx}, (void *[]){(void *)cdy, (void *)wb, out});
    if (blocked) {
        plan_reordered(st, accumulate ? p->dx_add : p->dx_out, p, p->cdx, p->dx, out, dx, sl.scratch);
    } else if (accumulate) {
        float *acc = dx;
        const float *part = out;
#pragma omp simd
        for (size_t k = 0; k < nx; k++) acc[k] += part[k];
    }
}

// dw (the primitive's format) = the block's weight gradient.
static void block_weight_grad(const plan_t *p, dnnl_stream_t st, slot_t sl, float *dw, const void *dy, const void *x) {
    const void *cdy = plan_reordered(st, p->dy_in, p, p->dy, p->cdy, dy, sl.yb, sl.scratch);
    const void *cx = plan_reordered(st, p->x_in, p, p->x, p->cx, x, sl.xb, sl.scratch);
    plan_run_on(st, p->bwd_weights, p, sl.scratch, 3, (int[]){DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS},
                (spk_cmd[]){p->cx, p->cdy, p->dw_prim}, (void *[]){(void *)cx, (void *)cdy, dw});
}

// A short block's results (n samples of `bytes` each, in the slot's out) written to dst, or (add:
// float32 ones) added to it.
static void unpadded(void *dst, const char *out, block_t k, size_t bytes, int add) {
    if (!add) {
        memcpy(dst, out, (size_t)k.n * bytes);
        return;
    }
    const size_t n = (size_t)k.n * bytes / sizeof(float);
    float *to = dst;
    const float *part = (const float *)out;
#pragma omp simd
    for (size_t i = 0; i < n; i++) to[i] += part[i];
}

void conv2d_dnnl_forward_fixed(void *y, const void *x, const void *w, const float *bias, const conv2d_shape_t *s,
                               conv2d_operands t, conv2d_algorithm a, void *workspace) {
    const int threads = omp_get_max_threads();
    const plan_t *p = fixed_plan(s, t, a);
    SPK_ASSERT(!p->none);
    omp_set_num_threads(1);  // (the forward's primitive is made at the plan's ICV too)
    plan_forward_ready(p, bias != NULL);
    omp_set_num_threads(threads);
    dnnl_stream_t *st = plan_thread_streams(threads);
    const fixed_parts_t q = fixed_parts_of(p, s, t, threads, workspace);
    const void *wf = plan_reordered(NULL, p->w_to_fwd, p, p->w_oihw, p->w_fwd, w, q.w_fwd, q.slots);
    const sample_bytes_t n = sample_bytes(s, t);
    const int P = fixed_block(s);
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < batch_blocks(s); i++) {
        const slot_t sl = my_slot(p, &q);
        const block_t k = batch_block(s, i);
        char *yk = (char *)y + k.b * n.yo;
        block_forward(p, st[omp_get_thread_num()], sl, padded(sl.in, (const char *)x + k.b * n.x, k, P, n.x), wf, bias,
                      k.n == P ? yk : sl.out);
        if (k.n < P) unpadded(yk, sl.out, k, n.yo, 0);
    }
}

// rows[i] = block u0 + i's weight gradient in the primitive's format (blocks of P samples), for
// i < n (threads over i).
static void weight_grads(const plan_t *p, dnnl_stream_t *st, const fixed_parts_t *q, int u0, int n, int P,
                         const void *dy, const void *x, const conv2d_shape_t *s, conv2d_operands t) {
    const sample_bytes_t m = sample_bytes(s, t);
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < n; i++)
        block_weight_grad(p, st[omp_get_thread_num()], my_slot(p, q), q->rows + i * p->dw_bytes / sizeof(float),
                          (const char *)dy + (size_t)(u0 + i) * P * m.y, (const char *)x + (size_t)(u0 + i) * P * m.x);
}

typedef struct {
    xsum_t dw;
    const plan_t *p;
    const fixed_parts_t *q;
    const conv2d_shape_t *s;
} group_done_t;

// A group's term, in the primitive's format, reordered to PyTorch's layout into dw's sums.
static void group_done(const float *term, void *ctx) {
    const group_done_t *g = ctx;
    const plan_t *p = g->p;
    xsum_add(g->dw, plan_reordered(NULL, p->dw_out, p, p->dw_prim, p->dw_oihw, term, g->q->oihw, g->q->slots), 1,
             (int64_t)conv2d_w_size(g->s), 1);
}

// dw += each group's term: its blocks' weight gradients (wgrad_block: whole blocks, or single
// samples), wave_rows at a time (whole groups, or a group in parts), added in order into the
// group's running sum in the primitive's format (kernels/cpu/group_terms.h), reordered to
// PyTorch's layout once a group is complete (a permutation: the same values).
static void weight_grads_exact(xsum_t dw, const plan_t *p, dnnl_stream_t *st, const fixed_parts_t *q, int threads,
                               const void *dy, const void *x, const conv2d_shape_t *s, conv2d_operands t, int group) {
    const size_t len = p->dw_bytes / sizeof(float);  // (padded where the format pads)
    const int P = wgrad_block(s, group), per = group / P, units = s->B / P;
    const int rows = wave_rows(threads), wave = per <= rows ? rows / per * per : rows;
    group_done_t g = {dw, p, q, s};
    for (int u0 = 0; u0 < units;) {
        const int left = per <= rows ? units - u0 : per - u0 % per;
        const int n = left < wave ? left : wave;
        weight_grads(p, st, q, u0, n, P, dy, x, s, t);
        spk_group_terms_fold(q->sum, q->rows, len, u0, n, per, group_done, &g);
        u0 += n;
    }
}

// The fixed plan of blocks of P samples, its backward's primitives made (at the plan's ICV too).
static const plan_t *backward_plan(const conv2d_shape_t *s, int P, conv2d_operands t, conv2d_algorithm a, int threads) {
    const plan_t *p = fixed_plan_of(s, P, t, a);
    SPK_ASSERT(!p->none);
    omp_set_num_threads(1);
    plan_backward_ready(p);
    omp_set_num_threads(threads);
    return p;
}

void conv2d_dnnl_backward_exact(void *dx, int accumulate, xsum_t dw, const void *dy, const void *x, const void *w,
                                const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a, int group,
                                void *workspace) {
    SPK_ASSERT(group > 0 && s->B % group == 0 && (t != CONV2D_BF16_OUT || (!accumulate && xsum_empty(dw))));
    const int threads = omp_get_max_threads();
    dnnl_stream_t *st = plan_thread_streams(threads);
    if (!xsum_empty(dw)) {
        const plan_t *pw = backward_plan(s, wgrad_block(s, group), t, a, threads);
        const fixed_parts_t qw = fixed_parts_of(pw, s, t, threads, workspace);
        weight_grads_exact(dw, pw, st, &qw, threads, dy, x, s, t, group);
    }
    if (!dx) return;
    // the input gradient, block by block: the plan's backward-data primitive, or its phases'
    // forward convolutions (their outputs in each thread's slot)
    const plan_t *p = backward_plan(s, fixed_block(s), t, a, threads);
    const fixed_parts_t q = fixed_parts_of(p, s, t, threads, workspace);
    const conv2d_shape_t one = block_shape(s, fixed_block(s));
    const sample_bytes_t n = sample_bytes(s, t);
    const void *wb = NULL, *wc[CONV2D_MAX_PHASES];
    if (p->phases)
        plan_phase_weights(p, &one, w, q.phase_w, q.slots, wc);
    else
        wb = plan_reordered(NULL, p->w_to_bwd, p, p->w_oihw, p->w_bwd, w, q.w_bwd, q.slots);
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < batch_blocks(s); i++) {
        const slot_t sl = my_slot(p, &q);
        const block_t k = batch_block(s, i);
        char *dxk = (char *)dx + k.b * n.dxo;
        const int whole = k.n == one.B;
        void *out = whole ? dxk : sl.out;
        const void *dyk = padded(sl.in, (const char *)dy + k.b * n.y, k, one.B, n.y);
        if (p->phases)
            plan_phases_run(st[omp_get_thread_num()], p, &one, out, whole && accumulate, dyk, wc, sl.dx, sl.scratch);
        else
            block_input_grad(p, st[omp_get_thread_num()], sl, out, whole && accumulate, dyk, wb,
                             (size_t)one.B * n.xf / sizeof(float));
        if (!whole) unpadded(dxk, sl.out, k, n.dxo, accumulate);
    }
}

#else  // built without oneDNN: kernels/cpu/conv2d.c runs its own convolution

int conv2d_dnnl_fixed_usable(const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a) {
    return (void)s, (void)t, (void)a, 0;
}
size_t conv2d_dnnl_fixed_workspace_bytes(const conv2d_shape_t *s, conv2d_operands t) { return (void)s, (void)t, 0; }
void conv2d_dnnl_forward_fixed(void *y, const void *x, const void *w, const float *bias, const conv2d_shape_t *s,
                               conv2d_operands t, conv2d_algorithm a, void *workspace) {
    (void)y, (void)x, (void)w, (void)bias, (void)s, (void)t, (void)a, (void)workspace;
}
void conv2d_dnnl_backward_exact(void *dx, int accumulate, xsum_t dw, const void *dy, const void *x, const void *w,
                                const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a, int group,
                                void *workspace) {
    (void)dx, (void)accumulate, (void)dw, (void)dy, (void)x, (void)w, (void)s, (void)t, (void)a, (void)group,
        (void)workspace;
}
#endif
