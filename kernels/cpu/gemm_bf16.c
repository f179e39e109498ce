// bf16 GEMM (kernels/gemm_bf16.h) on oneDNN's matmul primitive, or widened to float32.
//
// oneDNN 2.x has no public bf16 GEMM function, only the matmul primitive, which is built for
// one shape (dimensions, strides, post-ops) and then executed on any pointers. Primitives
// are cached per shape (a training step uses a few dozen shapes, all created in the first
// step; the least recently used ones make room for new shapes). Each thread executes on a
// stream and a scratchpad of its own (user scratchpad mode), so two threads may run the same
// primitive at once. A primitive executed inside an OpenMP
// parallel region runs on the calling thread (oneDNN does not nest its parallel loops).
#include "kernels/gemm_bf16.h"

#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/check.h"
#include "kernels/base/spk_assert.h"
#include "kernels/cpu/gemm_any.h"
#include "kernels/gemm.h"

// ---- float32 fallback ------------------------------------------------------------------------

// Per-thread float32 copies of the operands, grown as needed (kept for the thread's life).
static _Thread_local float *t_wide[2];
static _Thread_local size_t t_wide_n[2];

static float *widen(int slot, const spk_bf16 *x, int rows, int cols, int ld) {
    const size_t n = (size_t)rows * cols;
    if (n > t_wide_n[slot]) {
        free(t_wide[slot]);
        t_wide[slot] = mallocCheck(sizeof(float) * n);
        t_wide_n[slot] = n;
    }
    float *w = t_wide[slot];
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) w[(size_t)r * cols + c] = spk_bf16_to_f32(x[(size_t)r * ld + c]);
    return w;
}

static void gemm_wide(char ta, char tb, int M, int N, int K, const spk_bf16 *A, int lda, const spk_bf16 *B, int ldb,
                      float beta, float *C, int ldc) {
    const int ar = ta == 'N' ? M : K, ac = ta == 'N' ? K : M;
    const int br = tb == 'N' ? K : N, bc = tb == 'N' ? N : K;
    const float *a = widen(0, A, ar, ac, lda);
    const float *b = widen(1, B, br, bc, ldb);
    spk_sgemm(ta, tb, M, N, K, 1.0f, a, ac, b, bc, beta, C, ldc);
}

#ifdef SPK_USE_DNNL
#include "kernels/cpu/dnnl_check.h"

// One matmul shape. Batched shapes have batch > 0; plain ones batch = 0.
typedef struct {
    int64_t key[14];        // ta, tb, M, N, K, lda, ldb, ldc, strideA, strideB, strideC, batch, beta, threads
    dnnl_primitive_t prim;  // NULL: a free slot
    spk_md a, b, c, scratch;
    size_t scratch_bytes;
    int users;           // threads executing it now: it is not evicted while > 0
    uint64_t last_used;  // for evicting the least recently used
} plan_t;

// Training uses a few dozen shapes; inference on utterances of many lengths makes new ones
// for every length, so the cache evicts the least recently used shape nobody is running.
#define MAX_PLANS 256
static plan_t g_plans[MAX_PLANS];
static uint64_t g_clock;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static dnnl_engine_t g_engine;

static _Thread_local dnnl_stream_t t_stream;
static _Thread_local void *t_scratch;
static _Thread_local size_t t_scratch_bytes;

static int isa_has_bf16(void) {
    static int native = -1;  // racy first call writes the same value
    if (native < 0) native = spk_dnnl_isa_has(dnnl_cpu_isa_avx512_core_bf16);
    return native;
}

int spk_gemm_bf16_native(void) { return spk_gemm_get_backend() == SPK_GEMM_DNNL && isa_has_bf16(); }

// The matrix (rows, cols) of `trans` layout with row stride ld, behind `batch` (0: none) with
// batch stride `stride` (0: one matrix for all).
static spk_md matrix_md(dnnl_data_type_t dt, char trans, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                        int64_t stride) {
    const int64_t rs = trans == 'N' ? ld : 1, cs = trans == 'N' ? 1 : ld;
    if (batch == 0) {
        dnnl_dims_t dims = {rows, cols}, strides = {rs, cs};
        return spk_md_strides(2, dims, dt, strides);
    }
    // A shared matrix is a batch of one, which matmul broadcasts; its batch stride is unused.
    dnnl_dims_t dims = {stride ? batch : 1, rows, cols}, strides = {stride ? stride : rows * cols, rs, cs};
    return spk_md_strides(3, dims, dt, strides);
}

static void plan_create(plan_t *p, const int64_t *k) {
    const char ta = (char)k[0], tb = (char)k[1];
    const int64_t M = k[2], N = k[3], K = k[4], batch = k[11];
    if (!g_engine) dnnlCheck(dnnl_engine_create(&g_engine, dnnl_cpu, 0));
    p->a = matrix_md(dnnl_bf16, ta, M, K, k[5], batch, k[8]);
    p->b = matrix_md(dnnl_bf16, tb, K, N, k[6], batch, k[9]);
    p->c = matrix_md(dnnl_f32, 'N', M, N, k[7], batch, k[10]);
    dnnl_primitive_attr_t attr = spk_dnnl_attr(k[12] != 0);  // k[12]: beta = 1, accumulate into C
    dnnl_primitive_desc_t pd;
    dnnlCheck(spk_matmul_pd(&pd, g_engine, p->a, p->b, p->c, attr));
    p->scratch = spk_md_clone(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
    p->scratch_bytes = dnnl_memory_desc_get_size(p->scratch);
    dnnlCheck(dnnl_primitive_create(&p->prim, pd));
    dnnlCheck(dnnl_primitive_desc_destroy(pd));
    dnnlCheck(dnnl_primitive_attr_destroy(attr));
    memcpy(p->key, k, sizeof p->key);
}

// The plan of a shape, created on first use, held (users) until plan_release.
static plan_t *plan_acquire(const int64_t *key) {
    pthread_mutex_lock(&g_lock);
    plan_t *p = NULL, *victim = NULL;
    for (int i = 0; i < MAX_PLANS && !p; i++) {
        plan_t *q = &g_plans[i];
        if (q->prim && memcmp(q->key, key, sizeof q->key) == 0)
            p = q;
        else if (!q->prim || q->users == 0)
            if (!victim || !q->prim || (victim->prim && q->last_used < victim->last_used)) victim = q;
    }
    if (!p) {
        if (!victim) spk_die(SPK_EXIT_FAILURE, "all %d bf16 GEMM shapes are in use at once", MAX_PLANS);
        if (victim->prim) dnnlCheck(dnnl_primitive_destroy(victim->prim));
        victim->prim = NULL;
        spk_md *mds[] = {&victim->a, &victim->b, &victim->c, &victim->scratch};
        for (size_t i = 0; i < sizeof mds / sizeof mds[0]; i++) spk_md_free(mds[i]);
        plan_create(victim, key);
        p = victim;
    }
    p->users++;
    p->last_used = ++g_clock;
    pthread_mutex_unlock(&g_lock);
    return p;
}

static void plan_release(plan_t *p) {
    pthread_mutex_lock(&g_lock);
    p->users--;
    pthread_mutex_unlock(&g_lock);
}

static dnnl_memory_t memory(spk_cmd md, const void *ptr) {
    dnnl_memory_t m;
    dnnlCheck(dnnl_memory_create(&m, md, g_engine, (void *)ptr));
    return m;
}

static void plan_run(const plan_t *p, const void *A, const void *B, float *C) {
    if (!t_stream) dnnlCheck(dnnl_stream_create(&t_stream, g_engine, dnnl_stream_default_flags));
    if (p->scratch_bytes > t_scratch_bytes) {
        free(t_scratch);
        t_scratch = mallocCheck(p->scratch_bytes);
        t_scratch_bytes = p->scratch_bytes;
    }
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, memory(p->a, A)},
                               {DNNL_ARG_WEIGHTS, memory(p->b, B)},
                               {DNNL_ARG_DST, memory(p->c, C)},
                               {DNNL_ARG_SCRATCHPAD, memory(p->scratch, t_scratch)}};
    dnnlCheck(dnnl_primitive_execute(p->prim, t_stream, 4, args));
    dnnlCheck(dnnl_stream_wait(t_stream));
    for (int i = 0; i < 4; i++) dnnlCheck(dnnl_memory_destroy(args[i].memory));
}

static void gemm_native(char ta, char tb, int M, int N, int K, const spk_bf16 *A, int lda, int64_t sA,
                        const spk_bf16 *B, int ldb, int64_t sB, float beta, float *C, int ldc, int64_t sC, int batch) {
    // oneDNN plans a matmul for the threads it may use when it makes it (and may split K
    // between them): a plan made for one thread (spk_gemm_bf16_fixed) is another plan.
    const int64_t key[14] = {ta, tb, M, N, K, lda, ldb, ldc, sA, sB, sC, batch, beta != 0.0f, omp_get_max_threads()};
    plan_t *p = plan_acquire(key);
    plan_run(p, A, B, C);
    plan_release(p);
}
#else
int spk_gemm_bf16_native(void) { return 0; }
#endif

static void check_args(char ta, char tb, int M, int N, int K, int lda, int ldb, int ldc, float beta) {
    SPK_ASSERT(ta == 'N' || ta == 'T');
    SPK_ASSERT(tb == 'N' || tb == 'T');
    SPK_ASSERT(M > 0 && N > 0 && K > 0);
    SPK_ASSERT(lda >= (ta == 'N' ? K : M) && ldb >= (tb == 'N' ? N : K) && ldc >= N);
    SPK_ASSERT(beta == 0.0f || beta == 1.0f);
}

void spk_gemm_bf16(char transa, char transb, int M, int N, int K, const spk_bf16 *A, int lda, const spk_bf16 *B,
                   int ldb, float beta, float *C, int ldc) {
    check_args(transa, transb, M, N, K, lda, ldb, ldc, beta);
#ifdef SPK_USE_DNNL
    if (spk_gemm_bf16_native()) {
        gemm_native(transa, transb, M, N, K, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 0);
        return;
    }
#endif
    gemm_wide(transa, transb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

void spk_gemm_bf16_batched(char transa, char transb, int M, int N, int K, const spk_bf16 *A, int lda, int64_t strideA,
                           const spk_bf16 *B, int ldb, int64_t strideB, float beta, float *C, int ldc, int64_t strideC,
                           int batch) {
    SPK_ASSERT(batch >= 0 && (strideC != 0 || batch <= 1));
    if (batch == 0) return;
    check_args(transa, transb, M, N, K, lda, ldb, ldc, beta);
#ifdef SPK_USE_DNNL
    if (spk_gemm_bf16_native()) {
        gemm_native(transa, transb, M, N, K, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batch);
        return;
    }
#endif
#pragma omp parallel for schedule(static)
    for (int i = 0; i < batch; i++)
        gemm_wide(transa, transb, M, N, K, A + i * strideA, lda, B + i * strideB, ldb, beta, C + i * strideC, ldc);
}

// ---- the world-size-invariant mode (kernels/gemm_bf16.h) --------------------------------------

void spk_gemm_bf16_fixed(char transa, char transb, int M, int N, int K, const spk_bf16 *A, int lda, const spk_bf16 *B,
                         int ldb, float beta, float *C, int ldc) {
    // oneDNN (plan and run) and the widened path's float32 GEMM read the thread count they may use
    // from this task's OpenMP ICV: 1 plans the GEMM for, and runs it on, this thread.
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    spk_gemm_bf16(transa, transb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    omp_set_num_threads(threads);
}

void spk_gemm_bf16_rows(char transa, char transb, int M, int N, int K, const spk_bf16 *A, int lda, const spk_bf16 *B,
                        int ldb, float beta, float *C, int ldc) {
#pragma omp parallel for schedule(dynamic, 1) if (M > 1 && (double)M * N * K >= GEMM_LOOP_MIN_FLOPS)
    for (int i = 0; i < M; i++)
        spk_gemm_bf16_fixed(transa, transb, 1, N, K, transa == 'N' ? A + (size_t)i * lda : A + i, lda, B, ldb, beta,
                            C + (size_t)i * ldc, ldc);
}

void spk_gemm_bf16_batched_fixed(char transa, char transb, int M, int N, int K, const spk_bf16 *A, int lda,
                                 int64_t strideA, const spk_bf16 *B, int ldb, int64_t strideB, float beta, float *C,
                                 int ldc, int64_t strideC, int batch) {
    SPK_ASSERT(batch >= 0 && (strideC != 0 || batch <= 1));
#pragma omp parallel for schedule(dynamic, 1) if (batch > 1 && (double)batch * M * N * K >= GEMM_LOOP_MIN_FLOPS)
    for (int i = 0; i < batch; i++)
        spk_gemm_bf16_fixed(transa, transb, M, N, K, A + i * strideA, lda, B + i * strideB, ldb, beta, C + i * strideC,
                            ldc);
}

static void gemm_bf16_fixed_any(char ta, char tb, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                                float beta, float *C, int ldc) {
    spk_gemm_bf16_fixed(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

void spk_gemm_bf16_batched_exact(char transa, char transb, int M, int N, int K, const spk_bf16 *A, int lda,
                                 int64_t strideA, const spk_bf16 *B, int ldb, int64_t strideB, float *tmp, xsum_t C,
                                 int ldc, int batch, int group) {
    gemm_any_batched_exact(gemm_bf16_fixed_any, sizeof(spk_bf16), transa, transb, M, N, K, A, lda, strideA, B, ldb,
                           strideB, tmp, C, ldc, batch, group);
}
