// bf16 rounding (kernels/bf16.h): every float class against a reference that picks the nearer
// of the two neighbouring bf16 values in double (ties to the even one), the array conversions,
// then every backend against the CPU kernels, bit for bit (the rounding is integer arithmetic).
#include "backends.h"
#include "kernels/bf16.h"

static float f_of(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t u_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

// The bf16 nearest to f, ties to even: the two candidates are f truncated to 16 bits and the
// next bf16 away from zero.
static spk_bf16 round_reference(float f) {
    const uint32_t u = u_of(f);
    if (isnan(f)) return (spk_bf16)((u >> 16) | 0x40);
    const spk_bf16 lo = (spk_bf16)(u >> 16), hi = (spk_bf16)(lo + 1);
    if ((u & 0xffff) == 0) return lo;
    const double dlo = fabs((double)f - spk_bf16_to_f32(lo));
    // hi may be Inf (rounding up from the largest finite bf16): compare against the value
    // 2^128 it stands for, as IEEE rounding does
    const double vhi = (hi & 0x7fff) == 0x7f80 ? ldexp(1.0, 128) * (f < 0 ? -1 : 1) : spk_bf16_to_f32(hi);
    const double dhi = fabs((double)f - vhi);
    if (dlo < dhi) return lo;
    if (dhi < dlo) return hi;
    return (lo & 1) ? hi : lo;
}

static void check_round(float f, const char *what) {
    const spk_bf16 got = spk_bf16_round(f), want = round_reference(f);
    if (got != want) {
        printf("FAIL bf16 round %s: %.9g (0x%08x) -> 0x%04x, want 0x%04x\n", what, (double)f, u_of(f), got, want);
        g_failures++;
    }
}

// Channels [3, 3 + Cs) of x (B, C, T), with and without a (B, Cs, T) addend, copied out (the
// addend added) in float: the values bf16_slice_from_f32 rounds.
static float *slice_values(const float *x, const float *add, int B, int C, int T, int Cs) {
    const size_t ns = (size_t)B * Cs * T;
    float *s = alloc_f(ns);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < Cs; c++)
            for (int t = 0; t < T; t++) {
                const size_t i = ((size_t)b * Cs + c) * T + t;
                s[i] = x[((size_t)b * C + 3 + c) * T + t];
                if (add) s[i] += add[i];
            }
    return s;
}

// bf16_slice_from_f32 in both layouts: folded, the bits of bf16_fold_from_f32 of the copied
// slice; as channels [2, 2 + Cs) of a (B, Cs + 4, T) tensor, each value rounded in its place
// and the other channels left alone.
static void slice_check(const float *x, int B, int C, int T) {
    const int Cs = C - 5, D = Cs + 4;
    const size_t ns = (size_t)B * Cs * T, nd = (size_t)B * D * T;
    float *add = rand_f(ns, -2, 2);
    spk_bf16 *got = (spk_bf16 *)test_alloc(nd * sizeof(spk_bf16)),
             *want = (spk_bf16 *)test_alloc(ns * sizeof(spk_bf16));
    for (int with_add = 0; with_add < 2; with_add++) {
        const float *v = slice_values(x, with_add ? add : NULL, B, C, T, Cs);
        bf16_slice_from_f32(got, (size_t)B * T, T, x + 3 * T, C, with_add ? add : NULL, B, Cs, T);
        bf16_fold_from_f32(want, NULL, v, B, Cs, T);
        check_true(memcmp(got, want, ns * sizeof *got) == 0,
                   "bf16_slice_from_f32, folded: the bits of copy, add, fold");
        memset(got, 0x7f, nd * sizeof *got);
        bf16_slice_from_f32(got + 2 * T, T, (size_t)D * T, x + 3 * T, C, with_add ? add : NULL, B, Cs, T);
        int bad = 0;
        for (int b = 0; b < B; b++)
            for (int d = 0; d < D; d++)
                for (int t = 0; t < T; t++) {
                    const spk_bf16 g = got[((size_t)b * D + d) * T + t];
                    const int in = d >= 2 && d < 2 + Cs;
                    bad += in ? g != spk_bf16_round(v[((size_t)b * Cs + d - 2) * T + t]) : g != 0x7f7f;
                }
        check_true(bad == 0, "bf16_slice_from_f32 into channels of a (B, D, T) tensor: rounded in place, no other");
    }
}

static void cpu_checks(void) {
    // every class: zeros, subnormals, normals, the largest values, Inf, NaN, exact ties
    const uint32_t special[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x00008000u, 0x00018000u, 0x007fffffu,
                                0x00800000u, 0x3f800000u, 0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x3f807fffu,
                                0x7f7f7fffu, 0x7f7f8000u, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u,
                                0x7fc00000u, 0x7f800001u, 0xffc00001u};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) check_round(f_of(special[i]), "special");
    check_true(spk_bf16_round(f_of(0x3f808000u)) == 0x3f80, "a tie rounds to the even mantissa (down)");
    check_true(spk_bf16_round(f_of(0x3f818000u)) == 0x3f82, "a tie rounds to the even mantissa (up)");
    check_true(spk_bf16_round(f_of(0x7f7fffffu)) == 0x7f80, "beyond the largest bf16 rounds to Inf");
    check_true(isnan(spk_bf16_to_f32(spk_bf16_round(f_of(0x7f800001u)))), "a signalling NaN stays NaN");
    for (int i = 0; i < 200000; i++) check_round(f_of((uint32_t)rng_u64()), "random bits");
    // arrays: the scalar rounding, and bf16 -> float32 -> bf16 is the identity
    const size_t n = 100003;
    float *x = rand_f(n, -1e3f, 1e3f);
    spk_bf16 *h = (spk_bf16 *)test_alloc(n * sizeof(spk_bf16));
    float *back = alloc_f(n);
    bf16_from_f32(h, x, n);
    bf16_to_f32(back, h, n);
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad += h[i] != spk_bf16_round(x[i]) || spk_bf16_round(back[i]) != h[i];
    check_true(bad == 0, "bf16_from_f32 / bf16_to_f32 over an array");
    // folding: (B, C, T) -> (C, B*T), with and without the sums over b and t (accumulated)
    const int B = 5, C = 37, T = 211;
    float *xb = rand_f((size_t)B * C * T, -2, 2);
    spk_bf16 *f = (spk_bf16 *)test_alloc((size_t)B * C * T * sizeof(spk_bf16));
    float *sums = rand_f(C, -1, 1), *sums0 = copy_f(sums, C);
    double *want = zeros_d(C);
    bf16_fold_from_f32(f, sums, xb, B, C, T);
    bad = 0;
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            for (int t = 0; t < T; t++) {
                bad += f[((size_t)c * B + b) * T + t] != spk_bf16_round(xb[((size_t)b * C + c) * T + t]);
                want[c] += xb[((size_t)b * C + c) * T + t];
            }
    check_true(bad == 0, "bf16_fold_from_f32 puts x[b, c, t] at [c, b*T + t], rounded");
    for (int c = 0; c < C; c++) want[c] += sums0[c];
    check_close_d("bf16_fold_from_f32 sums", sums, want, C, 1e-5, 1e-4);
    memset(f, 0, (size_t)B * C * T * sizeof(spk_bf16));
    bf16_fold_from_f32(f, NULL, xb, B, C, T);
    check_true(f[(size_t)C * B * T - 1] == spk_bf16_round(xb[(size_t)B * C * T - 1]),
               "bf16_fold_from_f32 without sums");
    slice_check(xb, B, C, T);
}

// The backend's bf16_slice_from_f32 has the CPU's bits, with and without the addend, folded and
// into channels [1, 1 + Cs) of a (B, Cs + 2, T) tensor.
static void backend_slice_check(void) {
    const int B = 4, C = 21, T = 333, Cs = 16, D = Cs + 2;
    const size_t n = (size_t)B * C * T, ns = (size_t)B * Cs * T, nd = (size_t)B * D * T;
    float *x = rand_f(n, -3, 3), *add = rand_f(ns, -3, 3), *dx = dev_f(x, n), *dadd = dev_f(add, ns);
    spk_bf16 *want = (spk_bf16 *)test_alloc(nd * sizeof(spk_bf16)),
             *got = (spk_bf16 *)test_alloc(nd * sizeof(spk_bf16));
    spk_bf16 *dh = (spk_bf16 *)dev_alloc(nd * sizeof(spk_bf16));
    for (int layout = 0; layout < 2; layout++)
        for (int with_add = 0; with_add < 2; with_add++) {
            const size_t yc = layout ? (size_t)T : (size_t)B * T, yb = layout ? (size_t)D * T : (size_t)T;
            const size_t off = layout ? (size_t)T : 0;
            memset(want, 0, nd * sizeof(spk_bf16));
            g_be->upload(dh, want, nd * sizeof(spk_bf16));
            bf16_slice_from_f32(want + off, yc, yb, x + 2 * T, C, with_add ? add : NULL, B, Cs, T);
            g_be->bf16_slice_from_f32(dh + off, yc, yb, dx + 2 * T, C, with_add ? dadd : NULL, B, Cs, T);
            g_be->download(got, dh, nd * sizeof(spk_bf16));
            g_be_checks++;
            if (memcmp(got, want, nd * sizeof(spk_bf16)) != 0) {
                printf("FAIL [%s] bf16_slice_from_f32 (layout %d, addend %d) differs from the CPU's\n", g_be->name,
                       layout, with_add);
                g_failures++;
            }
        }
}

static void backend_checks(void) {
    const size_t n = 70001;
    float *x = rand_f(n, -50, 50);
    x[0] = f_of(0x3f808000u), x[1] = f_of(0x00018000u), x[2] = INFINITY, x[3] = f_of(0x7f7fffffu);
    spk_bf16 *want = (spk_bf16 *)test_alloc(n * sizeof(spk_bf16));
    bf16_from_f32(want, x, n);
    float *dx = dev_f(x, n);
    spk_bf16 *dh = (spk_bf16 *)dev_alloc(n * sizeof(spk_bf16));
    g_be->bf16_from_f32(dh, dx, n);
    spk_bf16 *got = (spk_bf16 *)test_alloc(n * sizeof(spk_bf16));
    g_be->download(got, dh, n * sizeof(spk_bf16));
    g_be_checks++;
    if (memcmp(got, want, n * sizeof(spk_bf16)) != 0) {
        printf("FAIL [%s] bf16_from_f32 differs from the CPU's rounding\n", g_be->name);
        g_failures++;
    }
    float *widened = alloc_f(n);
    bf16_to_f32(widened, want, n);
    float *dw = dev_f(NULL, n);
    g_be->bf16_to_f32(dw, dh, n);
    float *gotw = dev_get(dw, n);
    g_be_checks++;
    if (memcmp(gotw, widened, n * sizeof(float)) != 0) {
        printf("FAIL [%s] bf16_to_f32 differs from the CPU's\n", g_be->name);
        g_failures++;
    }
    // the fold of the finite values after the four special ones (a channel sum through Inf is
    // not part of the contract: the GPU's compensated sums give NaN there)
    const int B = 3, C = 19, T = 1000;  // n - 4 >= B * C * T
    float *sums = rand_f(C, -1, 1);
    float *dsums = dev_f(sums, C);
    bf16_fold_from_f32(want, sums, x + 4, B, C, T);
    g_be->bf16_fold_from_f32(dh, dsums, dx + 4, B, C, T);
    g_be->download(got, dh, (size_t)B * C * T * sizeof(spk_bf16));
    g_be_checks++;
    if (memcmp(got, want, (size_t)B * C * T * sizeof(spk_bf16)) != 0) {
        printf("FAIL [%s] bf16_fold_from_f32 differs from the CPU's\n", g_be->name);
        g_failures++;
    }
    cmp("bf16_fold_from_f32 sums", dsums, sums, C, TOL);
    backend_slice_check();
    dev_release();
    test_release();
}

int main(int argc, char **argv) { return test_main(argc, argv, "test_bf16", 99, cpu_checks, backend_checks); }
