// The machine's arithmetic peaks, for expressing GEMM-heavy throughput as a fraction of them:
// float32 FMA (AVX-512, else AVX2) and bf16 products: AMX tiles where the CPU has them
// (tdpbf16ps, a 16x32 by 32x16 product per instruction), else AVX512-BF16 dot products
// (vdpbf16ps: two products per float32 lane and instruction), in register-only loops with
// enough independent accumulators to cover the instructions' latency.
//   usage: bench_peak [threads]      (default: OpenMP's thread count)
// Prints one line per kind: "peak fp32 <GFLOP/s>" and "peak bf16 <GFLOP/s>" (or "n/a"), for
// `threads` cores; on AMX CPUs the bf16 peak is the tiles' and a line "peak bf16-vector" gives
// the AVX512-BF16 one (on Intel's cores half the fp32 FMA rate, an eighth of the tiles').
// Each thread times itself in thread CPU time, so other jobs on a shared machine slow the run
// down without lowering the figure; the figure is the per-thread best times the thread count.
#include <cpuid.h>
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

// Independent accumulators: latency x issue width, with margin, and all in registers with the
// two operands beside them (AVX-512 has 32 vector registers, AVX2 16: 16 accumulators there
// spill to the stack and measured half the peak).
#define ACC    16
#define ACC256 12
#define ITERS  4000000  // per repetition: ~0.1-0.3 s

static double thread_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Each loop returns the flops it did; the asm barrier keeps the multiplier opaque to the
// compiler, and the returned sum keeps the accumulators alive.
__attribute__((target("avx512f"))) static double fma512(double *sink) {
    __m512 acc[ACC], a = _mm512_set1_ps(1.0f), b = _mm512_set1_ps(1e-30f);
    for (int j = 0; j < ACC; j++) acc[j] = _mm512_setzero_ps();
    for (long i = 0; i < ITERS; i++) {
#pragma GCC unroll 16
        for (int j = 0; j < ACC; j++) acc[j] = _mm512_fmadd_ps(a, b, acc[j]);
        __asm__ volatile("" : "+v"(a));
    }
    for (int j = 1; j < ACC; j++) acc[0] = _mm512_add_ps(acc[0], acc[j]);
    *sink += _mm512_reduce_add_ps(acc[0]);
    return (double)ITERS * ACC * 16 * 2;
}

__attribute__((target("avx2,fma"))) static double fma256(double *sink) {
    __m256 acc[ACC256], a = _mm256_set1_ps(1.0f), b = _mm256_set1_ps(1e-30f);
    for (int j = 0; j < ACC256; j++) acc[j] = _mm256_setzero_ps();
    for (long i = 0; i < ITERS; i++) {
#pragma GCC unroll 16
        for (int j = 0; j < ACC256; j++) acc[j] = _mm256_fmadd_ps(a, b, acc[j]);
        __asm__ volatile("" : "+x"(a));
    }
    float out[8];
    for (int j = 1; j < ACC256; j++) acc[0] = _mm256_add_ps(acc[0], acc[j]);
    _mm256_storeu_ps(out, acc[0]);
    *sink += out[0];
    return (double)ITERS * ACC256 * 8 * 2;
}

__attribute__((target("avx512f,avx512bf16"))) static double dpbf16(double *sink) {
    __m512 acc[ACC];
    __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x0001);
    for (int j = 0; j < ACC; j++) acc[j] = _mm512_setzero_ps();
    for (long i = 0; i < ITERS; i++) {
#pragma GCC unroll 16
        for (int j = 0; j < ACC; j++) acc[j] = _mm512_dpbf16_ps(acc[j], a, b);
        __asm__ volatile("" : "+v"(a));
    }
    for (int j = 1; j < ACC; j++) acc[0] = _mm512_add_ps(acc[0], acc[j]);
    *sink += _mm512_reduce_add_ps(acc[0]);
    return (double)ITERS * ACC * 32 * 2;  // 16 lanes x 2 products, multiply + add
}

// AMX: four 16x16 float32 accumulator tiles fed by two A tiles (16 x 32 bf16) and two B tiles
// (32 x 16 bf16, pairs interleaved), each instruction independent of the previous three.
#define AMX_ITERS 1000000
struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

__attribute__((target("amx-tile,amx-bf16"))) static double amx_bf16(double *sink) {
    struct tile_config cfg = {.palette = 1};
    for (int t = 0; t < 8; t++) cfg.rows[t] = 16, cfg.colsb[t] = 64;
    _tile_loadconfig(&cfg);
    static _Thread_local uint16_t ones[16 * 32];
    for (int i = 0; i < 16 * 32; i++) ones[i] = 0x0001;  // tiny bf16: the sums stay finite
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, ones, 64);
    _tile_loadd(5, ones, 64);
    _tile_loadd(6, ones, 64);
    _tile_loadd(7, ones, 64);
    for (long i = 0; i < AMX_ITERS; i++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    static _Thread_local float out[16 * 16];
    _tile_stored(0, out, 64);
    _tile_release();
    *sink += out[0];
    return (double)AMX_ITERS * 4 * 16 * 16 * 32 * 2;
}

// GFLOP/s of `loop` on `threads` threads: each thread's best of `reps` in thread CPU time,
// summed over threads.
static double peak(double (*loop)(double *), int threads, int reps) {
    double total = 0, sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total, sink)
    {
        double best = 0;
        for (int r = 0; r < reps; r++) {
            const double t0 = thread_seconds();
            const double flops = loop(&sink);
            const double rate = flops / (thread_seconds() - t0) * 1e-9;
            if (rate > best) best = rate;
        }
        total = best;
    }
    if (sink == 42.0) printf("\n");  // keeps the loops' results alive
    return total;
}

// CPUID directly: clang 14's __builtin_cpu_supports knows neither "avx512bf16" nor "amx-bf16".
static int has_avx512_bf16(void) {
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 5 & 1);  // leaf 7.1 EAX bit 5
}

// AMX-BF16 (leaf 7.0 EDX bit 22), and Linux's permission for the tiles' state, which each
// process must ask for (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA, kernels >= 5.16).
static int amx_usable(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d >> 22 & 1)) return 0;
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : omp_get_max_threads();
    if (threads < 1) {
        fprintf(stderr, "usage: bench_peak [threads]\n");
        return 2;
    }
    __builtin_cpu_init();
    const int avx512 = __builtin_cpu_supports("avx512f");
    if (avx512 || __builtin_cpu_supports("fma"))
        printf("peak fp32 %.1f GFLOP/s (%s FMA, %d threads)\n", peak(avx512 ? fma512 : fma256, threads, 5),
               avx512 ? "AVX-512" : "AVX2", threads);
    else
        printf("peak fp32 n/a (no FMA instructions)\n");
    const int dot = avx512 && has_avx512_bf16();
    if (amx_usable()) {
        printf("peak bf16 %.1f GFLOP/s (AMX tiles, %d threads)\n", peak(amx_bf16, threads, 5), threads);
        if (dot)
            printf("peak bf16-vector %.1f GFLOP/s (AVX512-BF16 dot products, %d threads)\n", peak(dpbf16, threads, 5),
                   threads);
    } else if (dot)
        printf("peak bf16 %.1f GFLOP/s (AVX512-BF16 dot products, %d threads)\n", peak(dpbf16, threads, 5), threads);
    else
        printf("peak bf16 n/a (no AVX512-BF16 instructions)\n");
    return 0;
}
