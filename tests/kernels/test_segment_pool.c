// segment_pool (CAM++'s context-aware masking): the segment context and the segment mask against
// double references (segments of L frames from the first, the last one shorter, each averaged
// over its own frames as avg_pool1d with ceil_mode), finite differences of both backwards, the
// mask's strided output, accumulation of the context's input gradient, the same bits on 1 and 2
// threads. Then every backend against the CPU kernels.
#include <stdio.h>
#include <string.h>

#include "backends.h"
#include "exact_check.h"
#include "kernels/segment_pool.h"

static int segs(int T, int L) { return (T + L - 1) / L; }

static void context_reference(double *ctx, const float *x, int B, int T, int C, int L) {
    const int S = segs(T, L);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            double all = 0;
            for (int t = 0; t < T; t++) all += x[((size_t)b * T + t) * C + c];
            for (int s = 0; s < S; s++) {
                const int e = (s + 1) * L < T ? (s + 1) * L : T;
                double seg = 0;
                for (int t = s * L; t < e; t++) seg += x[((size_t)b * T + t) * C + c];
                ctx[((size_t)b * S + s) * C + c] = all / T + seg / (e - s * L);
            }
        }
}

typedef struct {
    int B, T, C, L, ld;
    float *x, *mask, *r, *out;
} seg_ctx;

static double context_loss(void *p) {
    seg_ctx *c = (seg_ctx *)p;
    segment_context_forward(c->out, c->x, c->B, c->T, c->C, c->L);
    return dot_d(c->out, c->r, (size_t)c->B * segs(c->T, c->L) * c->C);
}

static double mask_loss(void *p) {  // over the C columns of the strided output
    seg_ctx *c = (seg_ctx *)p;
    segment_mask_forward(c->out, c->ld, c->x, c->mask, c->B, c->T, c->C, c->L);
    double s = 0;
    for (size_t i = 0; i < (size_t)c->B * c->T; i++)
        for (int k = 0; k < c->C; k++) s += (double)c->out[i * c->ld + k] * c->r[i * c->ld + k];
    return s;
}

static void reference_case(int B, int T, int C, int L, int pad) {
    const int S = segs(T, L), ld = C + pad;
    const size_t nx = (size_t)B * T * C, nc = (size_t)B * S * C, ny = (size_t)B * T * ld;
    char tag[80];
    snprintf(tag, sizeof tag, "B%d T%d C%d L%d ld %d", B, T, C, L, ld);
    seg_ctx c = {B, T, C, L, ld, rand_f(nx, -1, 1), rand_f(nc, 0, 1), rand_f(nc, -1, 1), alloc_f(nc)};
    double *want = alloc_d(nc);
    context_reference(want, c.x, B, T, C, L);
    context_loss(&c);
    check_close_d(cname("context vs double %s", tag), c.out, want, nc, 1e-5, 1e-6);
    float *dx = rand_f(nx, -1, 1), *pre = copy_f(dx, nx), *fresh = zeros_f(nx);
    segment_context_backward(dx, c.r, B, T, C, L);
    segment_context_backward(fresh, c.r, B, T, C, L);
    check_accumulated(cname("context backward accumulates %s", tag), dx, pre, fresh, nx);
    fd_check(cname("fd context %s", tag), c.x, fresh, nx, context_loss, &c, 1e-2f, 2e-3, 2e-3, 40);
    const int before = with_threads(1);
    float *o1 = alloc_f(nc), *f1 = zeros_f(nx);
    segment_context_forward(o1, c.x, B, T, C, L);
    segment_context_backward(f1, c.r, B, T, C, L);
    with_threads(before);
    context_loss(&c);
    check_true(memcmp(o1, c.out, 4 * nc) == 0 && memcmp(f1, fresh, 4 * nx) == 0,
               cname("context the same bits on 1 thread %s", tag));

    // the mask: y (strided) = x * mask of the frame's segment
    seg_ctx m = {B, T, C, L, ld, c.x, c.mask, rand_f(ny, -1, 1), rand_f(ny, -1, 1)};
    const float *prefill = copy_f(m.out, ny);
    mask_loss(&m);
    int ok = 1;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int k = 0; k < ld; k++) {
                const size_t j = ((size_t)b * T + t) * ld + k;
                const float want_y =
                    k < C ? c.x[((size_t)b * T + t) * C + k] * c.mask[((size_t)b * S + t / L) * C + k] : prefill[j];
                ok &= m.out[j] == want_y;
            }
    check_true(ok, cname("mask forward (columns past C untouched) %s", tag));
    float *gx = alloc_f(nx), *gm = alloc_f(nc);
    fill_nan(gx, nx), fill_nan(gm, nc);
    segment_mask_backward(gx, gm, m.r, ld, m.x, m.mask, B, T, C, L);
    fd_check(cname("fd mask dmask %s", tag), m.mask, gm, nc, mask_loss, &m, 1e-2f, 2e-3, 2e-3, 40);
    fd_check(cname("fd mask dx %s", tag), m.x, gx, nx, mask_loss, &m, 1e-2f, 2e-3, 2e-3, 40);
    test_release();
}

static void cpu_checks(void) {
    reference_case(2, 7, 5, 3, 0);       // segments 3, 3, 1
    reference_case(3, 100, 40, 100, 8);  // one segment: context = twice the mean
    reference_case(2, 250, 70, 100, 2);  // 100, 100, 50, channels over three lanes
    reference_case(1, 5, 3, 10, 1);      // a segment longer than the utterance
}

static void backend_case(int B, int T, int C, int L, int pad) {
    const int S = segs(T, L), ld = C + pad;
    const size_t nx = (size_t)B * T * C, nc = (size_t)B * S * C, ny = (size_t)B * T * ld;
    const char *t0 = cname("B%d T%d C%d L%d ld %d", B, T, C, L, ld);
    char t[80];
    snprintf(t, sizeof t, "%s", t0);
    float *x = rand_f(nx, -1, 1), *mask = rand_f(nc, 0, 1), *dctx = rand_f(nc, -1, 1), *dy = rand_f(ny, -1, 1);
    float *x_ = dev_f(x, nx), *mask_ = dev_f(mask, nc), *dctx_ = dev_f(dctx, nc), *dy_ = dev_f(dy, ny);
    float *ctx = alloc_f(nc), *ctx_ = dev_f(NULL, nc);
    segment_context_forward(ctx, x, B, T, C, L);
    g_be->segment_context_forward(ctx_, x_, B, T, C, L);
    cmp(cname("segment_context_forward %s", t), ctx_, ctx, nc, TOL);
    grads_t g = grads_prefill(1, (size_t[]){nx});
    segment_context_backward(g.cpu[0], dctx, B, T, C, L);
    g_be->segment_context_backward(g.dev[0], dctx_, B, T, C, L);
    g_be->segment_context_backward(g.dev2[0], dctx_, B, T, C, L);
    grads_check(&g, "segment_context_backward", t, (const char *[]){"dx"}, (double[]){TOL});
    float *y = rand_f(ny, -1, 1), *y_ = dev_f(y, ny);
    segment_mask_forward(y, ld, x, mask, B, T, C, L);
    g_be->segment_mask_forward(y_, ld, x_, mask_, B, T, C, L);
    cmp(cname("segment_mask_forward %s", t), y_, y, ny, TOL);
    float *dx = alloc_f(nx), *dm = alloc_f(nc), *dx_ = dev_f(NULL, nx), *dm_ = dev_f(NULL, nc), *dm2_ = dev_f(NULL, nc);
    segment_mask_backward(dx, dm, dy, ld, x, mask, B, T, C, L);
    g_be->segment_mask_backward(dx_, dm_, dy_, ld, x_, mask_, B, T, C, L);
    cmp(cname("segment_mask_backward dx %s", t), dx_, dx, nx, TOL);
    cmp(cname("segment_mask_backward dmask %s", t), dm_, dm, nc, TOL);
    g_be->segment_mask_backward(dx_, dm2_, dy_, ld, x_, mask_, B, T, C, L);
    same_bits(cname("segment_mask_backward dmask twice %s", t), dm_, dm2_, nc);
    dev_release();
    test_release();
}

static void backend_checks(void) {
    backend_case(2, 7, 5, 3, 0);
    backend_case(4, 100, 128, 100, 0);
    backend_case(3, 333, 32, 100, 96);
    backend_case(2, 1000, 70, 100, 2);
}

int main(int argc, char **argv) { return test_main(argc, argv, "test_segment_pool", 23, cpu_checks, backend_checks); }
