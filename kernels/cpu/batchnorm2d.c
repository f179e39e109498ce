// BatchNorm2d over channels-last (N, C) rows (kernels/batchnorm2d.h). The statistics are sums
// over blocks of BN2D_BLOCK rows (float, vectorised across the channels of a row), each block's
// written to its own slot of the workspace and the slots combined in double in block order, so
// the result depends on N alone, not on the thread count. One pass for the sums (shifted by
// the mean of the first block, which keeps the variance from cancelling), one to apply them.
#include "kernels/batchnorm2d.h"

#include <stddef.h>
#include <stdlib.h>

#include "kernels/base/spk_assert.h"
#include "kernels/cpu/exact_rows.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/elementwise_math.h"

#define BN2D_BLOCK 256

#define BN2D_LANES 64  // channels summed at a time: their partial sums stay in registers

static int blocks_of(int N) { return (N + BN2D_BLOCK - 1) / BN2D_BLOCK; }

// Workspace: the blocks' partial sums (two doubles per channel each), their totals (two doubles
// per channel), then three floats per channel (the folded scale and shift, or the backward's
// means).
size_t batchnorm2d_workspace_floats(int N, int C) {
    return 2 * ((size_t)blocks_of(N) + 1) * 2 * (size_t)C + 3 * (size_t)C;
}

typedef struct {
    double *part, *sums;
    float *a, *b, *c;  // (C) each
} parts_t;

static parts_t parts_of(float *workspace, int N, int C) {
    parts_t p;
    p.part = (double *)workspace;
    p.sums = p.part + (size_t)blocks_of(N) * 2 * C;
    p.a = (float *)(p.sums + 2 * (size_t)C);
    p.b = p.a + C, p.c = p.b + C;
    return p;
}

// The gradient reaching the normalisation: dy, masked by the ReLU of the forward's output y, or
// by its bf16 copy yh (nonzero where y > 0: the forward zeroes the outputs bf16 rounds to zero).
static inline float masked(float dy, const float *y, size_t j, int relu) { return relu && !(y[j] > 0.0f) ? 0.0f : dy; }
static inline float masked_h(float dy, const spk_bf16 *yh, size_t j, int relu) { return relu && !yh[j] ? 0.0f : dy; }

// The per-row loops below take their choices (ReLU, residual, which outputs, the mask's source)
// as constants, so that each combination is a vectorised loop of its own: with the choices read
// inside one loop gcc vectorised none of it (conditional loads), and scalar code made these
// passes a third slower than their memory traffic. The dispatch is per row, inside the parallel
// loop (OpenMP outlines a parallel loop before inlining, so a constant outside it does not reach
// the loop).
#define ROW_INLINE static inline __attribute__((always_inline))

// An input of the passes below (x, a residual, dy): float32 (x), or bf16 (xh, where not NULL).
typedef struct {
    const float *x;
    const spk_bf16 *xh;
} bn_in_t;

// The input at element j: in.x, or (h, a constant in the loops) in.xh widened.
static inline float input_at(bn_in_t in, size_t j, int h) { return h ? spk_bf16_to_f32(in.xh[j]) : in.x[j]; }

// Software prefetch: a thread streaming three or four arrays of a few channels a row keeps too
// few cache lines in flight on its own (BatchNorm2d's bf16 backward over 512,000 rows of 32
// channels: 8.8 -> 6.2 ms a call on 2 threads, 17.7 -> 16.3 on one). Each pass asks for the
// lines of the row about PREFETCH_BYTES on from the one it works on (the last row where that is
// past the end), the same channels of it.
#define PREFETCH_BYTES 2048

// Rows ahead for rows of n elements of `elem` bytes.
static inline int rows_ahead(int n, size_t elem) { return spk_prefetch_rows_ahead((size_t)n * elem, PREFETCH_BYTES); }

// Where the pass on row i of [0, rows) prefetches: element c0 of row min(i + ahead, rows - 1).
static inline size_t ahead_at(int i, int ahead, int rows, int C, int c0) {
    return (size_t)(i + ahead < rows ? i + ahead : rows - 1) * (size_t)C + (size_t)c0;
}

// The n elements from element `at` of p (elem bytes each; nothing where p is NULL). The passes
// take p and elem from in_base and in_size before their loops (kernels/cpu/prefetch.h).
static inline void prefetch_span(const void *p, size_t elem, size_t at, int n) {
    spk_prefetch_read(p ? (const char *)p + at * elem : NULL, (size_t)n * elem);
}

static inline const void *in_base(bn_in_t in) { return in.xh ? (const void *)in.xh : (const void *)in.x; }
static inline size_t in_size(bn_in_t in) { return in.xh ? sizeof *in.xh : sizeof *in.x; }
// A ReLU's mask source, y or its bf16 copy yh where given (masked, masked_h), as an input.
static inline bn_in_t mask_of(const float *y, const spk_bf16 *yh) { return (bn_in_t){yh ? NULL : y, yh}; }

// The backward's terms of one row's lanes [c0, c0 + n): g and g * xhat, the mask from yh when
// hmask is set, the input from xh when hx is, the output gradient from dy.xh when hdy is.
ROW_INLINE void grad_terms_row(float *restrict s1, float *restrict s2, bn_in_t in, const int hx, bn_in_t dy,
                               const int hdy, const float *y, const spk_bf16 *yh, const int hmask, int relu,
                               const float *shift, const float *scale, size_t row, int c0, int n) {
#pragma omp simd
    for (int c = 0; c < n; c++) {
        const float d = input_at(dy, row + c, hdy);
        const float g = hmask ? masked_h(d, yh, row + c, relu) : masked(d, y, row + c, relu);
        s1[c] += g;
        s2[c] += g * ((input_at(in, row + c, hx) - shift[c0 + c]) * scale[c0 + c]);
    }
}

// The statistics' terms of one row's lanes: a = x - shift and a^2.
ROW_INLINE void stat_terms_row(float *restrict s1, float *restrict s2, bn_in_t in, const int hx, const float *shift,
                               size_t row, int c0, int n) {
#pragma omp simd
    for (int c = 0; c < n; c++) {
        const float a = input_at(in, row + c, hx) - shift[c0 + c];
        s1[c] += a;
        s2[c] += a * a;
    }
}

// The backward's terms of a row with the mask's source as a constant too (a bf16 dy comes with a
// bf16 input: the bf16 training step's).
ROW_INLINE void grad_terms_at(float *restrict s1, float *restrict s2, bn_in_t in, const int hx, bn_in_t dy,
                              const int hdy, const float *y, const spk_bf16 *yh, int relu, const float *shift,
                              const float *scale, size_t row, int c0, int n) {
    yh ? grad_terms_row(s1, s2, in, hx, dy, hdy, y, yh, 1, relu, shift, scale, row, c0, n)
       : grad_terms_row(s1, s2, in, hx, dy, hdy, y, yh, 0, relu, shift, scale, row, c0, n);
}

// Rows [i0, i1) of lanes [c0, c0 + n) into s1, s2 (n a constant where the compiler should keep
// the sums in registers): the statistics' terms (dy none) or the backward's.
static inline void sum_rows(float *restrict s1, float *restrict s2, bn_in_t in, bn_in_t dy, const float *y,
                            const spk_bf16 *yh, int relu, const float *shift, const float *scale, int i0, int i1, int C,
                            int c0, int n, int rows) {
    const int hx = in.xh != NULL, grad = dy.x || dy.xh, ahead = rows_ahead(n, in_size(in));
    // what the rows read: the input, dy, and the mask's source
    const bn_in_t m = mask_of(y, yh);
    const void *xp = in_base(in), *dp = in_base(dy), *mask = grad && relu ? in_base(m) : NULL;
    const size_t xs = in_size(in), ds = in_size(dy), mask_size = in_size(m);
    for (int i = i0; i < i1; i++) {
        const size_t row = (size_t)i * C + c0, at = ahead_at(i, ahead, rows, C, c0);
        prefetch_span(xp, xs, at, n), prefetch_span(dp, ds, at, n), prefetch_span(mask, mask_size, at, n);
        if (!grad)
            hx ? stat_terms_row(s1, s2, in, 1, shift, row, c0, n) : stat_terms_row(s1, s2, in, 0, shift, row, c0, n);
        else if (dy.xh)
            grad_terms_at(s1, s2, in, 1, dy, 1, y, yh, relu, shift, scale, row, c0, n);
        else if (hx)
            grad_terms_at(s1, s2, in, 1, dy, 0, y, yh, relu, shift, scale, row, c0, n);
        else
            grad_terms_at(s1, s2, in, 0, dy, 0, y, yh, relu, shift, scale, row, c0, n);
    }
}

// Rows [i0, i1) of lanes [c0, c0 + cn) into s1, s2, the common widths at compile time; the
// arrays hold `rows` rows.
static void lane_sums(float *s1, float *s2, bn_in_t x, bn_in_t dy, const float *y, const spk_bf16 *yh, int relu,
                      const float *shift, const float *scale, int i0, int i1, int C, int c0, int cn, int rows) {
    if (cn == BN2D_LANES)
        sum_rows(s1, s2, x, dy, y, yh, relu, shift, scale, i0, i1, C, c0, BN2D_LANES, rows);
    else if (cn == 32)
        sum_rows(s1, s2, x, dy, y, yh, relu, shift, scale, i0, i1, C, c0, 32, rows);
    else
        sum_rows(s1, s2, x, dy, y, yh, relu, shift, scale, i0, i1, C, c0, cn, rows);
}

// Per block k of rows, into part[k] (2C doubles): [0, C) the sums of a = x - shift, or of g =
// masked dy; [C, 2C) the sums of a^2, or of g * xhat (grad set: the backward's sums, with
// shift = mean and scale = rstd). Float over the block's rows, channels vectorised.
static void block_sums(double *part, bn_in_t x, bn_in_t dy, const float *y, const spk_bf16 *yh, int relu,
                       const float *shift, const float *scale, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int k = 0; k < blocks_of(N); k++) {
        double *p = part + (size_t)k * 2 * C;
        const int i0 = k * BN2D_BLOCK, i1 = (k + 1) * BN2D_BLOCK < N ? (k + 1) * BN2D_BLOCK : N;
        for (int c0 = 0; c0 < C; c0 += BN2D_LANES) {
            const int cn = C - c0 < BN2D_LANES ? C - c0 : BN2D_LANES;
            float s1[BN2D_LANES] = {0}, s2[BN2D_LANES] = {0};
            lane_sums(s1, s2, x, dy, y, yh, relu, shift, scale, i0, i1, C, c0, cn, N);
            for (int c = 0; c < cn; c++) p[c0 + c] = s1[c], p[C + c0 + c] = s2[c];
        }
    }
}

// sums[0, 2C) = the blocks' partial sums, combined in block order.
static void combine(double *sums, const double *part, int N, int C) {
    for (int c = 0; c < 2 * C; c++) sums[c] = 0.0;
    for (int k = 0; k < blocks_of(N); k++)
        for (int c = 0; c < 2 * C; c++) sums[c] += part[(size_t)k * 2 * C + c];
}

// The mean of each channel over the first block of rows (the shift of the variance sums).
static void first_block_mean(float *shift, bn_in_t in, int N, int C) {
    const int rows = N < BN2D_BLOCK ? N : BN2D_BLOCK;
    for (int c = 0; c < C; c++) shift[c] = 0.0f;
    for (int i = 0; i < rows; i++)
        for (int c = 0; c < C; c++) shift[c] += input_at(in, (size_t)i * C + c, in.xh != NULL);
    for (int c = 0; c < C; c++) shift[c] /= (float)rows;
}

// One row's channels [0, cn): y = act((x - mean) * scale + beta + residual), and yh = bf16(y)
// when rounded (rounded 2: yh alone); the input from in.xh when hx is set, the residual from
// res (with_residual 1) or its bf16 copy res_h (2).
ROW_INLINE void apply_row(float *restrict y, spk_bf16 *restrict yh, bn_in_t in, const int hx,
                          const float *restrict mean, const float *restrict scale, const float *restrict beta,
                          bn_in_t res, const int relu, const int with_residual, const int rounded, int cn) {
#pragma omp simd
    for (int c = 0; c < cn; c++) {
        float v = spk_bn_apply(input_at(in, (size_t)c, hx), mean[c], scale[c], beta[c]);
        if (with_residual) v += input_at(res, (size_t)c, with_residual == 2);
        v = relu && !(v > 0.0f) ? 0.0f : v;
        if (rounded) {
            const spk_bf16 h = spk_bf16_round(v);
            if (relu && !h) v = 0.0f;  // y > 0 where yh is nonzero: the backward's mask may read yh
            yh[c] = h;
        }
        if (rounded != 2) y[c] = v;
    }
}

// in (an input and its bf16 copy, one of them set) from element r on.
static inline bn_in_t at_row(bn_in_t in, size_t r) {
    return (bn_in_t){in.x ? in.x + r : NULL, in.xh ? in.xh + r : NULL};
}

// The row at element r, with its choices as constants (apply_row).
ROW_INLINE void apply_row_at(float *y, spk_bf16 *yh, bn_in_t in, const float *mean, const float *scale,
                             const float *beta, bn_in_t res, size_t r, const int relu, const int rounded, int cn) {
    float *yr = rounded != 2 ? y + r : NULL;
    spk_bf16 *hr = rounded ? yh + r : NULL;
    const bn_in_t at = at_row(in, r), rs = at_row(res, r);
    const int with_res = res.xh ? 2 : res.x ? 1 : 0;
    if (in.xh)
        with_res == 2   ? apply_row(yr, hr, at, 1, mean, scale, beta, rs, relu, 2, rounded, cn)
        : with_res == 1 ? apply_row(yr, hr, at, 1, mean, scale, beta, rs, relu, 1, rounded, cn)
                        : apply_row(yr, hr, at, 1, mean, scale, beta, rs, relu, 0, rounded, cn);
    else
        with_res == 2   ? apply_row(yr, hr, at, 0, mean, scale, beta, rs, relu, 2, rounded, cn)
        : with_res == 1 ? apply_row(yr, hr, at, 0, mean, scale, beta, rs, relu, 1, rounded, cn)
                        : apply_row(yr, hr, at, 0, mean, scale, beta, rs, relu, 0, rounded, cn);
}

// The row at element r with the ReLU's choice as a constant too.
ROW_INLINE void apply_row_relu(float *y, spk_bf16 *yh, bn_in_t in, const float *mean, const float *scale,
                               const float *beta, bn_in_t res, size_t r, int relu, const int rounded, int cn) {
    relu ? apply_row_at(y, yh, in, mean, scale, beta, res, r, 1, rounded, cn)
         : apply_row_at(y, yh, in, mean, scale, beta, res, r, 0, rounded, cn);
}

// y = act((x - mean) * scale + beta + residual) over rows [0, N) and channels [c0, c0 + cn) of C
// (the residual none, float32 or bf16), and yh = bf16(y) unless yh is NULL; y is not written when
// NULL.
static void apply(float *y, spk_bf16 *yh, bn_in_t x, const float *mean, const float *scale, const float *beta,
                  bn_in_t residual, int relu, int N, int C, int c0, int cn) {
    SPK_ASSERT(y || yh);
    const int ahead = rows_ahead(cn, in_size(x));
    const void *xp = in_base(x), *rp = in_base(residual);
    const size_t xs = in_size(x), rs = in_size(residual);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const size_t r = (size_t)i * C + c0, at = ahead_at(i, ahead, N, C, c0);
        prefetch_span(xp, xs, at, cn), prefetch_span(rp, rs, at, cn);
        if (yh && !y)
            apply_row_relu(y, yh, x, mean, scale, beta, residual, r, relu, 2, cn);
        else if (yh)
            apply_row_relu(y, yh, x, mean, scale, beta, residual, r, relu, 1, cn);
        else
            apply_row_relu(y, yh, x, mean, scale, beta, residual, r, relu, 0, cn);
    }
}

void batchnorm2d_forward_train(float *y, spk_bf16 *yh, float *mean, float *rstd, float *running_mean,
                               float *running_var, const float *x, const spk_bf16 *xh, const float *weight,
                               const float *bias, const float *residual, const spk_bf16 *residual_h, int relu, int N,
                               int C, float eps, float momentum, float *workspace) {
    SPK_ASSERT(N > 1 && C > 0);  // N > 1: PyTorch's "more than 1 value per channel"
    SPK_ASSERT(!x != !xh && !(residual && residual_h));
    const parts_t w = parts_of(workspace, N, C);
    const bn_in_t in = {x, xh};
    float *shift = w.a, *scale = w.b, *beta = w.c;
    first_block_mean(shift, in, N, C);
    block_sums(w.part, in, (bn_in_t){NULL, NULL}, NULL, NULL, 0, shift, NULL, N, C);
    combine(w.sums, w.part, N, C);
    for (int c = 0; c < C; c++) {
        double mu, var;
        spk_bn_stats_of_sums(w.sums[c], w.sums[C + c], shift[c], (double)N, &mu, &var);
        const float rs = spk_bn_rstd((float)var, eps);
        spk_bn_save_stats(mean, rstd, running_mean, running_var, c, (float)mu, rs, var, (size_t)N, momentum);
        scale[c] = spk_bn_scale(rs, weight ? weight[c] : 1.0f);
        beta[c] = bias ? bias[c] : 0.0f;
    }
    apply(y, yh, in, mean, scale, beta, (bn_in_t){residual, residual_h}, relu, N, C, 0, C);
}

void batchnorm2d_forward_infer(float *y, const float *x, const float *running_mean, const float *running_var,
                               const float *weight, const float *bias, const float *residual, int relu, int N, int C,
                               float eps) {
    SPK_ASSERT(N > 0 && C > 0);
    for (int c0 = 0; c0 < C; c0 += BN2D_LANES) {  // the folded scale and shift of a lane of channels
        const int cn = C - c0 < BN2D_LANES ? C - c0 : BN2D_LANES;
        float scale[BN2D_LANES], beta[BN2D_LANES];
        for (int c = 0; c < cn; c++) {
            scale[c] = spk_bn_scale(spk_bn_rstd(running_var[c0 + c], eps), weight ? weight[c0 + c] : 1.0f);
            beta[c] = bias ? bias[c0 + c] : 0.0f;
        }
        apply(y, NULL, (bn_in_t){x, NULL}, running_mean + c0, scale, beta, (bn_in_t){residual, NULL}, relu, N, C, c0,
              cn);
    }
}

// The backward's per-element pass over one row, its operands (the channel vectors wr ... mdyx
// indexed from c0; any of dx, dxh, dres and y may be NULL).
typedef struct {
    float *dx;
    spk_bf16 *dxh;
    float *dres;
    bn_in_t dy, x;  // the output gradient and the input, float32 or bf16
    const float *y, *wr, *mean, *rstd, *mdy, *mdyx;
    const spk_bf16 *yh;  // the mask's source where given, else y
} bwd_row_t;

// The row starting at element r. out: 0 no input gradient, 1 dx, 2 dxh; res: dres is written;
// acc: dx and dres are added to; hmask: the mask from yh; hx: the input from xh; hdy: the output
// gradient from dyh.
ROW_INLINE void backward_row(const bwd_row_t *a, size_t r, int cn, const int relu, const int res, const int out,
                             const int acc, const int hmask, const int hx, const int hdy) {
    float *restrict dx = a->dx, *restrict dres = a->dres;
    spk_bf16 *restrict dxh = a->dxh;
    const bn_in_t dy = a->dy, x = a->x;
    const float *restrict y = a->y;
    const float *restrict wr = a->wr, *restrict mean = a->mean, *restrict rstd = a->rstd;
    const float *restrict mdy = a->mdy, *restrict mdyx = a->mdyx;
    const spk_bf16 *restrict yh = a->yh;
#pragma omp simd
    for (int c = 0; c < cn; c++) {
        const size_t j = r + c;
        const float d0 = input_at(dy, j, hdy);
        const float g = hmask ? masked_h(d0, yh, j, relu) : masked(d0, y, j, relu);
        if (res) dres[j] = acc ? dres[j] + g : g;
        if (!out) continue;
        const float d = spk_bn_dx(g, (input_at(x, j, hx) - mean[c]) * rstd[c], wr[c], rstd[c], mdy[c], mdyx[c]);
        if (out == 2)
            dxh[j] = spk_bf16_round(d);
        else
            dx[j] = acc ? dx[j] + d : d;
    }
}

// The rounded input gradient's row with the mask's source as a constant too.
ROW_INLINE void backward_row_h(const bwd_row_t *a, size_t r, int cn, const int relu, const int res, const int acc,
                               const int hx, const int hdy) {
    a->yh ? backward_row(a, r, cn, relu, res, 2, acc, 1, hx, hdy)
          : backward_row(a, r, cn, relu, res, 2, acc, 0, hx, hdy);
}

ROW_INLINE void backward_row_out(const bwd_row_t *a, size_t r, int cn, const int relu, const int res, const int acc) {
    if (a->dxh && a->dy.xh)  // (bf16 inputs, the mask from yh: the bf16 training step's)
        backward_row_h(a, r, cn, relu, res, acc, 1, 1);
    else if (a->dxh && a->x.xh)
        backward_row_h(a, r, cn, relu, res, acc, 1, 0);
    else if (a->dxh)
        backward_row_h(a, r, cn, relu, res, acc, 0, 0);
    else if (a->dx)
        backward_row(a, r, cn, relu, res, 1, acc, 0, 0, 0);
    else
        backward_row(a, r, cn, relu, res, 0, acc, 0, 0, 0);
}

// Over channels [c0, c0 + cn) of C: dresidual = or += g, dx = or += BatchNorm's input gradient
// of g (g: dy masked by the ReLU of y), or dxh = it rounded to bf16, from the channels' weights wr
// and the means of g and g * xhat over the (global) batch (wr ... mdyx indexed from c0).
static void backward_apply(float *dx, spk_bf16 *dxh, float *dresidual, int accumulate, bn_in_t dy, const float *y,
                           const spk_bf16 *yh, bn_in_t x, const float *wr, const float *mean, const float *rstd,
                           const float *mdy, const float *mdyx, int relu, int N, int C, int c0, int cn) {
    if (!dx && !dxh && !dresidual) return;
    SPK_ASSERT((!x.xh && !dy.xh) || !dx);  // (bf16 inputs come with the rounded input gradient)
    const bwd_row_t a = {dx, dxh, dresidual, dy, x, y, wr, mean, rstd, mdy, mdyx, yh};
    const int res = dresidual != NULL, ahead = rows_ahead(cn, in_size(x));
    const bn_in_t m = mask_of(y, yh);
    const void *dp = in_base(dy), *xp = in_base(x), *mask = relu ? in_base(m) : NULL;
    const size_t ds = in_size(dy), xs = in_size(x), mask_size = in_size(m);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const size_t r = (size_t)i * C + c0, at = ahead_at(i, ahead, N, C, c0);
        prefetch_span(dp, ds, at, cn), prefetch_span(xp, xs, at, cn), prefetch_span(mask, mask_size, at, cn);
        if (accumulate)  // the models overwrite; accumulating is not specialised further
            backward_row_out(&a, r, cn, relu, res, 1);
        else if (relu)
            res ? backward_row_out(&a, r, cn, 1, 1, 0) : backward_row_out(&a, r, cn, 1, 0, 0);
        else
            res ? backward_row_out(&a, r, cn, 0, 1, 0) : backward_row_out(&a, r, cn, 0, 0, 0);
    }
}

static void backward(float *dx, spk_bf16 *dxh, float *dresidual, int accumulate, float *dweight, float *dbias,
                     bn_in_t dy, const float *y, const spk_bf16 *yh, bn_in_t x, const float *weight, const float *mean,
                     const float *rstd, int relu, int N, int C, float *workspace) {
    SPK_ASSERT(N > 1 && C > 0);
    SPK_ASSERT(!relu || y != NULL || yh != NULL);
    SPK_ASSERT(!x.x != !x.xh && !dy.x != !dy.xh && (!dy.xh || x.xh));
    const parts_t w = parts_of(workspace, N, C);
    block_sums(w.part, x, dy, y, yh, relu, mean, rstd, N, C);
    combine(w.sums, w.part, N, C);
    float *wr = w.a, *mdy = w.b, *mdyx = w.c;
    for (int c = 0; c < C; c++) {
        if (dbias) dbias[c] += (float)w.sums[c];
        if (dweight) dweight[c] += (float)w.sums[C + c];
        wr[c] = weight ? weight[c] : 1.0f;
        mdy[c] = (float)(w.sums[c] / N);
        mdyx[c] = (float)(w.sums[C + c] / N);
    }
    backward_apply(dx, dxh, dresidual, accumulate, dy, y, yh, x, wr, mean, rstd, mdy, mdyx, relu, N, C, 0, C);
}

void batchnorm2d_backward(float *dx, float *dresidual, int accumulate, float *dweight, float *dbias, const float *dy,
                          const float *y, const float *x, const float *weight, const float *mean, const float *rstd,
                          int relu, int N, int C, float *workspace) {
    backward(dx, NULL, dresidual, accumulate, dweight, dbias, (bn_in_t){dy, NULL}, y, NULL, (bn_in_t){x, NULL}, weight,
             mean, rstd, relu, N, C, workspace);
}

void batchnorm2d_backward_rounded(spk_bf16 *dxh, float *dresidual, int accumulate, float *dweight, float *dbias,
                                  const float *dy, const spk_bf16 *dyh, const float *y, const spk_bf16 *yh,
                                  const float *x, const spk_bf16 *xh, const float *weight, const float *mean,
                                  const float *rstd, int relu, int N, int C, float *workspace) {
    SPK_ASSERT(dxh);
    backward(NULL, dxh, dresidual, accumulate, dweight, dbias, (bn_in_t){dy, dyh}, y, yh, (bn_in_t){x, xh}, weight,
             mean, rstd, relu, N, C, workspace);
}

// ---- the world-size-invariant mode --------------------------------------------------------------
// Each sample's sums as the default mode's, a sample at a time: float over blocks of its rows
// (from its first), the blocks added in double in order; threads over samples and lanes of
// channels. Then per channel its group's samples added in order, each group one exact term.

// Per group: sums[c] += sum of a(i, c), sums[C + c] += sum of b(i, c) over the group's rows, a
// and b as block_sums: x - shift and its square (no shift: 0), or (grad) g and g * xhat.
static void group_sums(xsum_t sums, xsum_t dweight, xsum_t dbias, const float *x, const float *dy, const float *y,
                       int relu, const float *shift, const float *scale, int B, int HW, int C, int group) {
    SPK_ASSERT(B > 0 && HW > 0 && C > 0 && group > 0 && B % group == 0);
    const int lanes = (C + BN2D_LANES - 1) / BN2D_LANES;
    double *part = malloc(sizeof(double) * 2 * (size_t)B * C);  // (B, 2, C): each sample's two sums
    float *zero = shift ? NULL : calloc((size_t)C, sizeof(float));
    SPK_ASSERT(part != NULL && (shift || zero));
    const bn_in_t in = {x, NULL}, grad = {dy, NULL};
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int l = 0; l < lanes; l++) {
            const int c0 = l * BN2D_LANES, cn = C - c0 < BN2D_LANES ? C - c0 : BN2D_LANES, end = (b + 1) * HW;
            double g1[BN2D_LANES] = {0}, g2[BN2D_LANES] = {0};
            for (int i0 = b * HW; i0 < end; i0 += BN2D_BLOCK) {
                float s1[BN2D_LANES] = {0}, s2[BN2D_LANES] = {0};
                lane_sums(s1, s2, in, grad, y, NULL, relu, shift ? shift : zero, scale, i0,
                          end - i0 < BN2D_BLOCK ? end : i0 + BN2D_BLOCK, C, c0, cn, B * HW);
                for (int c = 0; c < cn; c++) g1[c] += s1[c], g2[c] += s2[c];
            }
            for (int c = 0; c < cn; c++) {
                part[(size_t)b * 2 * C + c0 + c] = g1[c];
                part[((size_t)b * 2 + 1) * C + c0 + c] = g2[c];
            }
        }
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        double g1 = 0.0, g2 = 0.0;
        for (int b = 0; b < B; b++) {
            const double p1 = part[(size_t)b * 2 * C + c], p2 = part[((size_t)b * 2 + 1) * C + c];
            if (!xsum_add_group_pair(sums, c, C, b, group, p1, p2, &g1, &g2)) continue;
            if (!xsum_empty(dbias)) xsum_add_one(xsum_at(dbias, c), g1);
            if (!xsum_empty(dweight)) xsum_add_one(xsum_at(dweight, c), g2);
        }
    }
    free(part);
    free(zero);
}

void batchnorm2d_stats_partial(xsum_t sums, const float *x, const float *shift, int B, int HW, int C, int group) {
    group_sums(sums, xsum_none(), xsum_none(), x, NULL, NULL, 0, shift, NULL, B, HW, C, group);
}

void batchnorm2d_forward_global(float *y, float *mean, float *rstd, float *running_mean, float *running_var,
                                const float *x, const float *weight, const float *bias, const float *residual, int relu,
                                xsum_t sums, int64_t N_global, int N, int C, float eps, float momentum) {
    SPK_ASSERT(N > 0 && C > 0 && N_global > 1);
    for (int c0 = 0; c0 < C; c0 += BN2D_LANES) {  // the folded scale and shift of a lane of channels
        const int cn = C - c0 < BN2D_LANES ? C - c0 : BN2D_LANES;
        float scale[BN2D_LANES], beta[BN2D_LANES];
        for (int c = c0; c < c0 + cn; c++) {
            double mu, var;
            spk_bn_stats_of_sums(xsum_value_of(sums, c), xsum_value_of(sums, C + c),
                                 running_mean ? running_mean[c] : 0.0f, (double)N_global, &mu, &var);
            const float rs = spk_bn_rstd((float)var, eps);
            spk_bn_save_stats(mean, rstd, running_mean, running_var, c, (float)mu, rs, var, (size_t)N_global, momentum);
            scale[c - c0] = spk_bn_scale(rs, weight ? weight[c] : 1.0f);
            beta[c - c0] = bias ? bias[c] : 0.0f;
        }
        apply(y, NULL, (bn_in_t){x, NULL}, mean + c0, scale, beta, (bn_in_t){residual, NULL}, relu, N, C, c0, cn);
    }
}

void batchnorm2d_backward_partial(xsum_t sums, xsum_t dweight, xsum_t dbias, const float *dy, const float *y,
                                  const float *x, const float *mean, const float *rstd, int relu, int B, int HW, int C,
                                  int group) {
    SPK_ASSERT(!relu || y != NULL);
    group_sums(sums, dweight, dbias, x, dy, y, relu, mean, rstd, B, HW, C, group);
}

void batchnorm2d_backward_global(float *dx, spk_bf16 *dxh, float *dresidual, int accumulate, const float *dy,
                                 const float *y, const float *x, const float *weight, const float *mean,
                                 const float *rstd, int relu, xsum_t sums, int64_t N_global, int N, int C) {
    SPK_ASSERT(N > 0 && C > 0 && N_global > 0 && !(dx && dxh));
    SPK_ASSERT(!relu || y != NULL);
    for (int c0 = 0; c0 < C; c0 += BN2D_LANES) {  // the channels' means, a lane at a time
        const int cn = C - c0 < BN2D_LANES ? C - c0 : BN2D_LANES;
        float wr[BN2D_LANES], mdy[BN2D_LANES], mdyx[BN2D_LANES];
        for (int c = 0; c < cn; c++) {
            wr[c] = weight ? weight[c0 + c] : 1.0f;
            mdy[c] = (float)(xsum_value_of(sums, c0 + c) / (double)N_global);
            mdyx[c] = (float)(xsum_value_of(sums, C + c0 + c) / (double)N_global);
        }
        backward_apply(dx, dxh, dresidual, accumulate, (bn_in_t){dy, NULL}, y, NULL, (bn_in_t){x, NULL}, wr, mean + c0,
                       rstd + c0, mdy, mdyx, relu, N, C, c0, cn);
    }
}
