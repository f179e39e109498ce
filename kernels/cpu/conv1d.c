// Conv1d (stride 1, reflect 'same' padding, dilation) as im2col + GEMM. Two schedules:
//
// PER_SAMPLE (the default): the batch is split across threads and every thread runs
//   single-threaded GEMMs on whole samples, straight on the (B, C, T) tensors:
//   y_b = W . col_b, dx_b += fold(W^T . dy_b), and dW += dy_b . col_b^T with dW split into
//   blocks of columns (input channels) or, for K = 1 with Cout > Cin, rows across threads. K = 1
//   needs no im2col and no copies at all; K > 1 builds col_b (Cin*K, T) in a per-thread slot that
//   stays in L2. (Weight gradients of weights beyond L2, 2^20+ floats, use the folded GEMM
//   instead.) Samples and blocks are handed out dynamically and threads only meet at the end of
//   each loop, which holds up well when other processes share the cores (a descheduled thread does
//   not stall the others inside every GEMM). Each output is still computed by one thread in a fixed
//   order, so results do not depend on the dynamic schedule.
//
// FOLDED (optional; slower here except for the weight gradient of big weights): the batch is folded
// into the GEMM's N dimension,
//   a chunk of ~2048 columns at a time, and each GEMM is threaded by the backend:
//   col (Cin*K, Nc) = im2col of the chunk, Yf (Cout, Nc) = W . col -> scattered to y + bias,
//   dW += dYf . col^T, dcol = W^T . dYf -> folded back (col2im + reflect) onto dx. With bf16
//   operands on a few threads the forward and dx go in smaller chunks that the threads share,
//   one GEMM of one thread each (shares_chunks).
//
// Both schedules take operands (x, w, dy) of either element type (conv1d_schedule.h): float32
// here, bf16 for the mixed-precision entry points (kernels/cpu/conv1d_bf16.c). im2col copies
// operands as they are; the GEMM outputs (y, dcol, dW) are float32 in both.
//
// The world-size-invariant mode (conv1d_forward_fixed, conv1d_forward_grouped,
// conv1d_backward_exact): the forward and input gradient sample by sample or by chunks of
// groups, with GEMMs planned for one thread, and the weight and bias gradients as exact sums of
// every sample's (or group's) contribution, by blocks set by the shapes
// (kernels/cpu/conv1d_exact_grads.c), so nothing depends on B or on the thread count.
#include "kernels/conv1d.h"

#include <omp.h>
#include <string.h>

#include "kernels/base/spk_assert.h"
#include "kernels/cpu/conv1d_exact_grads.h"
#include "kernels/cpu/conv1d_layout.h"
#include "kernels/cpu/conv1d_schedule.h"
#include "kernels/cpu/rows.h"
#include "kernels/gemm.h"

#define PAR_MIN_FLOPS 4000000  // multiply-adds: below this, GEMM loops run on one thread

static void sgemm_operands(char ta, char tb, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                           float beta, float *C, int ldc) {
    spk_sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

static void sgemm_fixed_operands(char ta, char tb, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                                 float beta, float *C, int ldc) {
    spk_sgemm_fixed(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

const conv_operands_t conv_operands_f32 = {sizeof(float), sgemm_operands, 0};
// The world-size-invariant mode's: every GEMM planned for one thread, whatever the thread count.
static const conv_operands_t conv_operands_f32_fixed = {sizeof(float), sgemm_fixed_operands, 0};

void conv_check_shape(int B, int Cin, int Cout, int T, int K, int dilation) {
    SPK_ASSERT(B > 0 && Cin > 0 && Cout > 0 && T > 0);
    SPK_ASSERT(K > 0 && K % 2 == 1 && dilation > 0);
    SPK_ASSERT(T > conv_pad(K, dilation));  // reflect padding needs T > pad
}

static conv1d_algo g_algo = CONV1D_AUTO;

void conv1d_set_algo(conv1d_algo algo) { g_algo = algo; }

// CONV1D_AUTO: the per-sample schedule for float32 operands and weights within L2; the folded
// one for bf16 operands, and for weights beyond L2, which each per-sample GEMM would read from
// L3 again (1536 -> 1536 measured ~10% faster folded, forward and input gradient).
static int use_per_sample(const conv_operands_t *op, int Cin, int Cout, int K) {
    if (g_algo != CONV1D_AUTO) return g_algo == CONV1D_PER_SAMPLE;
    return !op->folded && !conv_big_weight(Cin, Cout, K);
}

// Per-sample schedule: per-thread slots for K > 1, each an im2col (Cin*K, T) of operands or
// the float32 GEMM output dcol of the same shape. The workspace holds at least
// min(B, MIN_SLOTS) of them, so only more threads than that are capped.
#define MIN_SLOTS 16

// A chunk of nc columns of the folded schedules: (CK, nc) for an im2col or the float32 dcol,
// then (Cout, nc), the float32 GEMM output or the gathered dy operand.
static size_t chunk_bytes(int Cin, int Cout, int K, size_t nc) {
    return conv_round_up((size_t)Cin * K * nc * sizeof(float)) + (size_t)Cout * nc * sizeof(float);
}

// The folded schedule's part of the workspace: one chunk of conv_chunk_samples(B, T) samples.
static size_t folded_bytes(int B, int Cin, int Cout, int T, int K) {
    return chunk_bytes(Cin, Cout, K, (size_t)conv_chunk_samples(B, T) * T);
}

// Chunks in flight at once, each in a slot of the workspace: as many as the process has cores
// (a constant, unlike the thread count, which regions of one thread lower; the calls use at
// most this many threads), up to FIXED_MAX_CHUNKS to hold memory down.
#define FIXED_MAX_CHUNKS 4

static int fixed_chunk_slots(int B) {
    int n = omp_get_num_procs();
    n = n < FIXED_MAX_CHUNKS ? n : FIXED_MAX_CHUNKS;
    return n < B ? n : B;
}

static size_t fixed_slot_bytes(int B, int Cin, int Cout, int T, int K) {
    return conv_round_up(folded_bytes(B, Cin, Cout, T, K));  // conv_chunk_samples(B, T) >= (G, T)
}

// Workspace layout: [ scratch: max(folded, slots) ][ W^T copy (CK, Cout) ]
static size_t scratch_bytes(int B, int Cin, int Cout, int T, int K) {
    const size_t folded = folded_bytes(B, Cin, Cout, T, K);
    // per-sample slots are only used for K > 1 (im2col); K = 1 runs straight on the tensors
    const size_t slots = K > 1 ? (size_t)(B < MIN_SLOTS ? B : MIN_SLOTS) * conv_slot_bytes(Cin, T, K) : 0;
    return conv_round_up(folded > slots ? folded : slots);
}

// With folded operands, room for the chunks the threads may share (shares_chunks), at the head.
size_t conv_schedule_bytes(const conv_operands_t *op, int B, int Cin, int Cout, int T, int K, int dilation) {
    conv_check_shape(B, Cin, Cout, T, K, dilation);
    const size_t plain = scratch_bytes(B, Cin, Cout, T, K) + (size_t)Cin * K * Cout * op->elem;
    const size_t chunks = op->folded ? (size_t)fixed_chunk_slots(B) * fixed_slot_bytes(B, Cin, Cout, T, K) : 0;
    return chunks > plain ? chunks : plain;
}

static int slots_in_workspace(int B, int Cin, int Cout, int T, int K) {
    const size_t n = scratch_bytes(B, Cin, Cout, T, K) / conv_slot_bytes(Cin, T, K);
    return n < (size_t)B ? (int)n : B;
}

// ---- per-sample schedule -------------------------------------------------------------------

// threads for the per-sample loops: all of them, capped by the workspace slots (K > 1) and by
// the amount of work
static int per_sample_threads(int B, int Cin, int Cout, int T, int K) {
    int nt = omp_get_max_threads();
    const int slots = slots_in_workspace(B, Cin, Cout, T, K);
    if (K > 1 && nt > slots) nt = slots;
    if ((double)B * Cin * K * Cout * T < PAR_MIN_FLOPS) nt = 1;
    return nt;
}

// One call's operands, as the per-sample loops' bodies read them: y or dx (out), x or dy (in),
// the weights or their transposed copy (w), and for the weight gradient's blocks dy and x.
typedef struct {
    const conv_operands_t *op;
    float *out;
    int dx_set;
    conv_tensor_t in, x;
    const void *w;
    const float *bias;
    int B, Cin, Cout, T, K, dilation;
    int nblocks, extent, by_rows;  // the weight gradient's blocks
    int group;                     // the invariant mode's chunks of groups
} sample_args_t;

typedef void sample_body_fn(const sample_args_t *a, int i, char *slot);

static sample_args_t sample_args(const conv_operands_t *op, float *out, conv_tensor_t in, const void *w, int B, int Cin,
                                 int Cout, int T, int K, int dilation) {
    sample_args_t a = {0};
    a.op = op, a.out = out, a.in = in, a.w = w;
    a.B = B, a.Cin = Cin, a.Cout = Cout, a.T = T, a.K = K, a.dilation = dilation;
    return a;
}

// body(a, i, slot) for i < n on nt threads, slot the thread's `slot` bytes of scratch (NULL for
// 0); with nt = 1 outside any parallel region: inside a region of one thread the GEMMs, which
// thread themselves outside an active region, open nested teams, whose threads libgomp makes
// afresh for each (ECAPA's embedding of single utterances on 2 threads made 2,820 threads and
// took 9.1 s, against 2.3 s on one thread).
static void item_loop(int nt, int n, void *scratch, size_t slot, sample_body_fn *body, const sample_args_t *a) {
    if (nt == 1) {
        for (int i = 0; i < n; i++) body(a, i, slot ? (char *)scratch : NULL);
        return;
    }
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
    for (int i = 0; i < n; i++) body(a, i, slot ? (char *)scratch + (size_t)omp_get_thread_num() * slot : NULL);
}

// The per-sample loops: a slot is an im2col of one sample (K > 1).
static void per_sample_loop(int nt, int n, void *scratch, sample_body_fn *body, const sample_args_t *a) {
    item_loop(nt, n, scratch, a->K > 1 ? conv_slot_bytes(a->Cin, a->T, a->K) : 0, body, a);
}

// Sample b's output; col: its im2col (CK, T).
static void forward_sample(const sample_args_t *a, int b, char *col) {
    const int CK = a->Cin * a->K, Cout = a->Cout, T = a->T;
    const size_t e = a->op->elem;
    float *yb = a->out + (size_t)b * Cout * T;
    const void *src = conv_row_at(a->in, b, 0, e);
    int ld = (int)a->in.row;
    if (a->K > 1) {
        conv_im2col_sample(col, a->in, b, 0, a->Cin, T, a->K, a->dilation, e);
        src = col;
        ld = T;
    }
    if (a->bias)
        for (int co = 0; co < Cout; co++)
            for (int t = 0; t < T; t++) yb[(size_t)co * T + t] = a->bias[co];
    a->op->gemm('N', 'N', Cout, T, CK, a->w, CK, src, ld, a->bias ? 1.0f : 0.0f, yb, T);
}

static void forward_per_sample(const conv_operands_t *op, float *y, conv_tensor_t x, const void *w, const float *bias,
                               int B, int Cin, int Cout, int T, int K, int dilation, void *scratch) {
    sample_args_t a = sample_args(op, y, x, w, B, Cin, Cout, T, K, dilation);
    a.bias = bias;
    per_sample_loop(per_sample_threads(B, Cin, Cout, T, K), B, scratch, forward_sample, &a);
}

// Sample b's input gradient from the transposed weights; dcol: the GEMM's output (K > 1).
static void input_grad_sample(const sample_args_t *a, int b, char *dcol) {
    const int Cin = a->Cin, T = a->T, K = a->K;
    const void *dyb = conv_row_at(a->in, b, 0, a->op->elem);
    float *dxb = a->out + (size_t)b * Cin * T;
    if (K == 1) {  // dx_set: written, not added
        a->op->gemm('N', 'N', Cin, T, a->Cout, a->w, a->Cout, dyb, (int)a->in.row, a->dx_set ? 0.0f : 1.0f, dxb, T);
        return;
    }
    if (a->dx_set) memset(dxb, 0, (size_t)Cin * T * sizeof *dxb);
    a->op->gemm('N', 'N', Cin * K, T, a->Cout, a->w, a->Cout, dyb, (int)a->in.row, 0.0f, (float *)dcol, T);
    conv_col2im_add_sample(dxb, (float *)dcol, Cin, T, K, a->dilation);
}

// dx (B, Cin, T) += the input gradient, sample by sample (op: the GEMMs, serial or fixed);
// dx_set: each sample's dx zeroed first.
static void input_grad_per_sample(const conv_operands_t *op, float *dx, int dx_set, conv_tensor_t dy, const void *w,
                                  int B, int Cin, int Cout, int T, int K, int dilation, void *scratch) {
    // op(A) = W^T (CK, Cout) as a transposed copy, made once per call: GEMMs reading W
    // transposed were 20-30% slower on AVX2 (oneDNN's sgemm, 512 -> 512 and 1536 -> 128 1x1, one
    // thread; docs/kernels.md), and no faster with AVX-512
    void *wt = (char *)scratch + scratch_bytes(B, Cin, Cout, T, K);
    conv_transpose_weight(wt, w, Cout, Cin * K, op->elem);
    sample_args_t a = sample_args(op, dx, dy, wt, B, Cin, Cout, T, K, dilation);
    a.dx_set = dx_set;
    per_sample_loop(per_sample_threads(B, Cin, Cout, T, K), B, scratch, input_grad_sample, &a);
}

// Block blk of dW (a range of rows or columns of its extent), summing the samples in order.
static void weight_grad_block(const sample_args_t *a, int blk, char *col) {
    const int CK = a->Cin * a->K, T = a->T;
    const size_t e = a->op->elem;
    const int e0 = (int)((long)a->extent * blk / a->nblocks);
    const int e1 = (int)((long)a->extent * (blk + 1) / a->nblocks);
    const conv_tensor_t dy = a->in, x = a->x;
    for (int b = 0; b < a->B; b++) {
        if (a->by_rows) {  // dW[e0:e1, :] += dy_b[e0:e1, :] . x_b^T
            a->op->gemm('N', 'T', e1 - e0, CK, T, conv_row_at(dy, b, e0, e), (int)dy.row, conv_row_at(x, b, 0, e),
                        (int)x.row, 1.0f, a->out + (size_t)e0 * CK, CK);
            continue;
        }
        const void *src = conv_row_at(x, b, e0, e);  // rows e0*K .. e1*K of col_b
        int ld = (int)x.row;
        if (a->K > 1) {
            conv_im2col_sample(col, x, b, e0, e1, T, a->K, a->dilation, e);
            src = col;
            ld = T;
        }
        a->op->gemm('N', 'T', a->Cout, (e1 - e0) * a->K, T, conv_row_at(dy, b, 0, e), (int)dy.row, src, ld, 1.0f,
                    a->out + (size_t)e0 * a->K, CK);
    }
}

static void backward_per_sample(const conv_operands_t *op, float *dx, int dx_set, float *dw, conv_tensor_t dy,
                                conv_tensor_t x, const void *w, int B, int Cin, int Cout, int T, int K, int dilation,
                                void *scratch) {
    const int nt = per_sample_threads(B, Cin, Cout, T, K);
    if (dx) input_grad_per_sample(op, dx, dx_set, dy, w, B, Cin, Cout, T, K, dilation, scratch);
    if (!dw) return;
    // dW is cut into blocks, each owned by whichever thread takes it and summing the samples in
    // order, so the result does not depend on the schedule. Blocks are column ranges (input
    // channels: im2col is then done once per block), or row ranges (output channels) for K = 1
    // with Cout > Cin, keeping each block's GEMM wide. Block count: a multiple of the thread
    // count (balanced when the cores are free), up to 4 per thread (a thread slowed by other load
    // hands blocks to the others), >= 64 rows/columns each.
    sample_args_t a = sample_args(op, dw, dy, NULL, B, Cin, Cout, T, K, dilation);
    a.x = x;
    a.by_rows = K == 1 && Cout > Cin;
    a.extent = a.by_rows ? Cout : Cin;
    int per = (a.by_rows ? Cout : Cin * K) / (64 * nt);
    per = per < 1 ? 1 : (per > 4 ? 4 : per);
    a.nblocks = nt * per < a.extent ? nt * per : a.extent;
    per_sample_loop(nt, a.nblocks, scratch, weight_grad_block, &a);
}

// ---- folded schedule ------------------------------------------------------------------------

// Samples b0 .. b0+nb of y with the batch folded into the GEMM's columns; chunk: chunk_bytes
// for nb_max samples.
static void forward_chunk(const conv_operands_t *op, float *y, conv_tensor_t x, const void *w, const float *bias,
                          int b0, int nb, int nb_max, int B, int Cin, int Cout, int T, int K, int dilation,
                          char *chunk) {
    const int nc = nb * T, CK = Cin * K;
    void *col = chunk;                                                          // (CK, nc)
    float *yf = (float *)conv_chunk_second(chunk, Cin, K, (size_t)nb_max * T);  // (Cout, nc)
    const void *src = conv_row_at(x, b0, 0, op->elem);
    int ld = (int)x.row;
    if (K > 1 || !conv_is_folded(x, B, T)) {
        conv_im2col(col, nc, x, b0, nb, Cin, T, K, dilation, op->elem);
        src = col;
        ld = nc;
    }
    op->gemm('N', 'N', Cout, nc, CK, w, CK, src, ld, 0.0f, yf, nc);
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)Cout * nc >= CONV_PAR_MIN_COPY)
    for (int bi = 0; bi < nb; bi++) {
        for (int co = 0; co < Cout; co++) {
            const float bv = bias ? bias[co] : 0.0f;
            const float *s = yf + (size_t)co * nc + (size_t)bi * T;
            float *dst = y + ((size_t)(b0 + bi) * Cout + co) * T;
#pragma omp simd
            for (int t = 0; t < T; t++) dst[t] = s[t] + bv;
        }
    }
}

// dx of samples b0 .. b0+nb from their folded dy (Cout, nb*T) at dyf (leading dimension lddy):
// dcol = W^T dyf, folded back; dcol (CK, nb*T) float32.
static void input_grad_chunk(const conv_operands_t *op, float *dx, int dx_set, const void *dyf, int lddy, const void *w,
                             int b0, int nb, int Cin, int Cout, int T, int K, int dilation, float *dcol) {
    const int CK = Cin * K, nc = nb * T;
    op->gemm('T', 'N', CK, nc, Cout, w, CK, dyf, lddy, 0.0f, dcol, nc);
    conv_col2im_add(dx, dcol, nc, b0, nb, Cin, T, K, dilation, dx_set);
}

static void forward_folded(const conv_operands_t *op, float *y, conv_tensor_t x, const void *w, const float *bias,
                           int B, int Cin, int Cout, int T, int K, int dilation, void *scratch) {
    const int nb_max = conv_chunk_samples(B, T);
    for (int b0 = 0; b0 < B; b0 += nb_max) {
        const int nb = B - b0 < nb_max ? B - b0 : nb_max;
        forward_chunk(op, y, x, w, bias, b0, nb, nb_max, B, Cin, Cout, T, K, dilation, scratch);
    }
}

// Tensors that are folded already are read in place (dy always; x when K = 1), and with no
// copy to bound, the weight gradient alone takes the whole batch in one GEMM.
static void backward_folded(const conv_operands_t *op, float *dx, int dx_set, float *dw, conv_tensor_t dy,
                            conv_tensor_t x, const void *w, int B, int Cin, int Cout, int T, int K, int dilation,
                            void *scratch) {
    const int CK = Cin * K;
    const size_t e = op->elem;
    const int dy_in_place = conv_is_folded(dy, B, T), x_in_place = K == 1 && conv_is_folded(x, B, T);
    const int nb_max = !dx && dy_in_place && x_in_place ? B : conv_chunk_samples(B, T);
    for (int b0 = 0; b0 < B; b0 += nb_max) {
        const int nb = B - b0 < nb_max ? B - b0 : nb_max;
        const int nc = nb * T;
        void *col = scratch;                          // (CK, nc): im2col, then the float32 dcol
        const void *dyf = conv_row_at(dy, b0, 0, e);  // (Cout, nc)
        int lddy = (int)dy.row;
        if (!dy_in_place) {
            char *copy = conv_chunk_second(scratch, Cin, K, (size_t)nb_max * T);
            conv_fold_rows(copy, dy, b0, nb, Cout, T, e);
            dyf = copy;
            lddy = nc;
        }
        if (dw) {
            const void *src = conv_row_at(x, b0, 0, e);
            int ld = (int)x.row;
            if (!x_in_place) {
                conv_im2col(col, nc, x, b0, nb, Cin, T, K, dilation, e);
                src = col;
                ld = nc;
            }
            op->gemm('N', 'T', Cout, CK, nc, dyf, lddy, src, ld, 1.0f, dw, CK);
        }
        if (dx) input_grad_chunk(op, dx, dx_set, dyf, lddy, w, b0, nb, Cin, Cout, T, K, dilation, (float *)col);
    }
}

// ---- chunks of groups shared by the threads ---------------------------------------------------
// The folded schedule's forward and input gradient by chunks of groups of samples, one GEMM of
// one thread a chunk, the threads taking whole chunks: the invariant mode's groups (below), and
// the default's bf16 batch on a few threads (shares_chunks), as one group.

// Samples in a chunk of a group: float32's of about 2048 columns (conv_chunk_samples); bf16's of
// about BF16_CHUNK_COLS, read in place for K = 1, so more chunks cost no copies and give the
// threads more to share. ECAPA C=512, groups of 32, T 200, `spkddp bench --precision bf16`: on
// one thread chunks of 2, 4, 8 and 11 samples ran alike (53-57 samples/s); on two, 4 samples (91
// and 94 samples/s) beat 8 (88, 91), 2 (86, 91) and 11 (82, 83, three chunks for two threads),
// and the default's threaded GEMMs (83, 84).
#define BF16_CHUNK_COLS 800

static int group_chunk_samples(const sample_args_t *a) {
    return conv_chunk_samples_of(a->group, a->T, a->op->elem == sizeof(float) ? CONV_CHUNK_COLS : BF16_CHUNK_COLS);
}

// Chunk i of the call's groups: its first sample and its samples.
static void group_chunk(const sample_args_t *a, int i, int *b0, int *nb) {
    const int per = group_chunk_samples(a), n = (a->group + per - 1) / per;
    const int j = i % n;
    *b0 = i / n * a->group + j * per;
    *nb = a->group - j * per < per ? a->group - j * per : per;
}

static int group_chunks(const sample_args_t *a) {
    const int per = group_chunk_samples(a);
    return a->B / a->group * ((a->group + per - 1) / per);
}

static int fixed_chunk_threads(int B, int Cin, int Cout, int T, int K, int nchunks) {
    int nt = omp_get_max_threads();
    if (nt > fixed_chunk_slots(B)) nt = fixed_chunk_slots(B);
    if (nt > nchunks) nt = nchunks;
    if ((double)B * Cin * K * Cout * T < PAR_MIN_FLOPS) nt = 1;
    return nt;
}

// A group's samples folded in the mode's layout are read in place (x for K = 1, and dy), as the
// default folded schedule reads its own.
static void forward_group_chunk(const sample_args_t *a, int i, char *chunk) {
    int b0, nb;
    group_chunk(a, i, &b0, &nb);
    const int g = b0 / a->group, T = a->T;
    forward_chunk(a->op, a->out + (size_t)g * a->group * a->Cout * T,
                  conv_group_at(a->in, g, a->group, a->Cin, T, a->op->elem), a->w, a->bias, b0 - g * a->group, nb,
                  conv_chunk_samples(a->B, T), a->group, a->Cin, a->Cout, T, a->K, a->dilation, chunk);
}

static void input_grad_group_chunk(const sample_args_t *a, int i, char *chunk) {
    int b0, nb;
    group_chunk(a, i, &b0, &nb);
    const int g = b0 / a->group, T = a->T;
    const size_t e = a->op->elem, nc_max = (size_t)conv_chunk_samples(a->B, T) * T, nc = (size_t)nb * T;
    const conv_tensor_t dy = conv_group_at(a->in, g, a->group, a->Cout, T, e);
    const void *dyf = conv_row_at(dy, b0 - g * a->group, 0, e);
    int lddy = (int)dy.row;
    if (!conv_is_folded(dy, a->group, T)) {
        char *copy = conv_chunk_second(chunk, a->Cin, a->K, nc_max);  // (Cout, nc)
        conv_fold_rows(copy, a->in, b0, nb, a->Cout, T, e);
        dyf = copy;
        lddy = (int)nc;
    }
    input_grad_chunk(a->op, a->out, a->dx_set, dyf, lddy, a->w, b0, nb, a->Cin, a->Cout, T, a->K, a->dilation,
                     (float *)chunk);
}

// y, or dx from dy, by the chunks of the groups.
static void by_group_chunks(sample_body_fn *body, sample_args_t *a, int group, void *scratch) {
    a->group = group;
    const int n = group_chunks(a);
    const int nt = fixed_chunk_threads(a->B, a->Cin, a->Cout, a->T, a->K, n);
    item_loop(nt, n, scratch, fixed_slot_bytes(a->B, a->Cin, a->Cout, a->T, a->K), body, a);
}

// The default's bf16 operands (folded) on 2 to fixed_chunk_slots threads: the forward and the
// input gradient by chunks of about BF16_CHUNK_COLS columns that the threads share (the batch
// one group, read in place), where oneDNN's threading of one GEMM of up to 2048 columns measured
// slower (ECAPA C=512 on two threads, batches of 16 and 32: 4-24% more samples/s a step, in 6
// alternated pairs). One thread keeps the GEMMs of 2048 columns (chunks of 800 took 1.5-2%
// longer there), and more threads than slots the threaded GEMMs.
static int shares_chunks(const conv_operands_t *op, int B) {
    const int nt = omp_get_max_threads();
    return op->folded && nt > 1 && nt <= fixed_chunk_slots(B);
}

// ---- the schedule's entry points --------------------------------------------------------------

void conv_schedule_forward(const conv_operands_t *op, float *y, conv_tensor_t x, const void *w, const float *bias,
                           int B, int Cin, int Cout, int T, int K, int dilation, void *scratch) {
    conv_check_shape(B, Cin, Cout, T, K, dilation);
    if (use_per_sample(op, Cin, Cout, K)) {
        forward_per_sample(op, y, x, w, bias, B, Cin, Cout, T, K, dilation, scratch);
    } else if (shares_chunks(op, B)) {
        sample_args_t a = sample_args(op, y, x, w, B, Cin, Cout, T, K, dilation);
        a.bias = bias;
        by_group_chunks(forward_group_chunk, &a, B, scratch);
    } else {
        forward_folded(op, y, x, w, bias, B, Cin, Cout, T, K, dilation, scratch);
    }
}

void conv_schedule_backward(const conv_operands_t *op, float *dx, int dx_accumulate, float *dw, conv_tensor_t dy,
                            conv_tensor_t x, const void *w, int B, int Cin, int Cout, int T, int K, int dilation,
                            void *scratch) {
    conv_check_shape(B, Cin, Cout, T, K, dilation);
    const int dx_set = !dx_accumulate;
    if (!use_per_sample(op, Cin, Cout, K)) {
        if (dx && shares_chunks(op, B)) {
            sample_args_t a = sample_args(op, dx, dy, w, B, Cin, Cout, T, K, dilation);
            a.dx_set = dx_set;
            by_group_chunks(input_grad_group_chunk, &a, B, scratch);
            dx = NULL;
        }
        if (dx || dw) backward_folded(op, dx, dx_set, dw, dy, x, w, B, Cin, Cout, T, K, dilation, scratch);
        return;
    }
    // The per-sample weight gradient re-reads its dW block for every sample, and for K > 1
    // builds the block's im2col for every sample again; the folded GEMM (K = ~2048 columns
    // per call, one im2col) measured faster for weights beyond L2 (~20%) and for K > 1 (10-25%).
    if (dw && (K > 1 || conv_big_weight(Cin, Cout, K))) {
        backward_folded(op, NULL, 0, dw, dy, x, w, B, Cin, Cout, T, K, dilation, scratch);
        dw = NULL;
    }
    if (dx || dw) backward_per_sample(op, dx, dx_set, dw, dy, x, w, B, Cin, Cout, T, K, dilation, scratch);
}

// ---- float32 entry points (kernels/conv1d.h) --------------------------------------------------

static void bias_grad(float *dbias, const float *dy, int B, int Cout, int T) {
#pragma omp parallel for schedule(static) if ((size_t)B * Cout * T >= CONV_PAR_MIN_COPY)
    for (int co = 0; co < Cout; co++) {
        float acc = 0.0f;
        for (int b = 0; b < B; b++) acc += spk_row_sum(dy + ((size_t)b * Cout + co) * T, T);
        dbias[co] += acc;
    }
}

size_t conv1d_workspace_floats(int B, int Cin, int Cout, int T, int K, int dilation) {
    return (conv_schedule_bytes(&conv_operands_f32, B, Cin, Cout, T, K, dilation) + sizeof(float) - 1) / sizeof(float);
}

void conv1d_forward(float *y, const float *x, const float *w, const float *bias, int B, int Cin, int Cout, int T, int K,
                    int dilation, float *workspace) {
    const conv_tensor_t xt = {x, (size_t)Cin * T, (size_t)T};
    conv_schedule_forward(&conv_operands_f32, y, xt, w, bias, B, Cin, Cout, T, K, dilation, workspace);
}

void conv1d_backward(float *dx, int dx_accumulate, float *dw, float *dbias, const float *dy, const float *x,
                     const float *w, int B, int Cin, int Cout, int T, int K, int dilation, float *workspace) {
    conv_check_shape(B, Cin, Cout, T, K, dilation);
    if (dbias) bias_grad(dbias, dy, B, Cout, T);
    if (!dx && !dw) return;
    const conv_tensor_t dyt = {dy, (size_t)Cout * T, (size_t)T}, xt = {x, (size_t)Cin * T, (size_t)T};
    conv_schedule_backward(&conv_operands_f32, dx, dx_accumulate, dw, dyt, xt, w, B, Cin, Cout, T, K, dilation,
                           workspace);
}

// ---- the world-size-invariant mode ----------------------------------------------------------

// Groups of G > 1 on bf16 layers (which the default runs folded) and on float32 layers whose
// weights exceed L2 (likewise): the forward and the input gradient fold each group's samples into
// the GEMMs' columns too, in chunks of group_chunk_samples (about 2048 columns in float32, as the
// group-folded weight gradient's, kernels/cpu/conv1d_exact_grads.c; 800 in bf16), one GEMM per
// chunk planned for one thread, threads taking whole chunks. The chunks and their GEMMs' shapes
// depend on G, T and the layer only. A 1536 x 1536 GEMM over a chunk of 8 samples measured 46 ms
// on one thread, against 61 ms as 8 GEMMs of one sample (which pack the weights 8 times) and 55 ms
// as 6 blocks of 256 rows (which pack the chunk 6 times), so the chunks are not cut further for
// more threads. bf16 operands come in the mode's layout by groups, each group folded
// (kernels/conv1d_bf16.h), so their chunks are read in place for K = 1, as the default's are (with
// the operands in (B, C, T) and copied into chunks, folding every bf16 layer made ECAPA C=512's
// invariant step 5% slower; in place it took 0.299 s against 0.320 s sample by sample, one thread,
// batch 16, the default's 0.294 s).
static int layer_folds(const conv_operands_t *op, int Cin, int Cout, int K) {
    return op->elem != sizeof(float) || conv_big_weight(Cin, Cout, K);
}

static int fixed_folds(const conv_operands_t *op, int Cin, int Cout, int K, int group) {
    return group > 1 && layer_folds(op, Cin, Cout, K);
}

size_t conv_schedule_bytes_fixed(const conv_operands_t *op, int B, int Cin, int Cout, int T, int K, int dilation) {
    const size_t plain = conv_schedule_bytes(op, B, Cin, Cout, T, K, dilation);
    if (!layer_folds(op, Cin, Cout, K)) return plain;
    const size_t chunks = (size_t)fixed_chunk_slots(B) * fixed_slot_bytes(B, Cin, Cout, T, K);
    return chunks > plain ? chunks : plain;
}

void conv_schedule_forward_fixed(const conv_operands_t *op, float *y, conv_tensor_t x, const void *w, const float *bias,
                                 int B, int Cin, int Cout, int T, int K, int dilation, void *scratch, int group) {
    conv_check_shape(B, Cin, Cout, T, K, dilation);
    SPK_ASSERT(group > 0 && B % group == 0);
    if (!fixed_folds(op, Cin, Cout, K, group)) {
        forward_per_sample(op, y, x, w, bias, B, Cin, Cout, T, K, dilation, scratch);
        return;
    }
    sample_args_t a = sample_args(op, y, x, w, B, Cin, Cout, T, K, dilation);
    a.bias = bias;
    by_group_chunks(forward_group_chunk, &a, group, scratch);
}

void conv_schedule_backward_exact(const conv_operands_t *op, float *dx, int dx_accumulate, float *dw_tmp, xsum_t dw,
                                  xsum_t dbias, const float *dy_f32, conv_tensor_t dy, conv_tensor_t x, const void *w,
                                  int B, int Cin, int Cout, int T, int K, int dilation, void *scratch, int group) {
    conv_check_shape(B, Cin, Cout, T, K, dilation);
    SPK_ASSERT(group > 0 && B % group == 0);
    if (dx && fixed_folds(op, Cin, Cout, K, group)) {
        sample_args_t a = sample_args(op, dx, dy, w, B, Cin, Cout, T, K, dilation);
        a.dx_set = !dx_accumulate;
        by_group_chunks(input_grad_group_chunk, &a, group, scratch);
    } else if (dx) {
        input_grad_per_sample(op, dx, !dx_accumulate, dy, w, B, Cin, Cout, T, K, dilation, scratch);
    }
    if (!xsum_empty(dw)) {
        SPK_ASSERT(dw_tmp != NULL);
        const int nt = per_sample_threads(B, Cin, Cout, T, K);
        conv_weight_grad_exact(op, dw_tmp, dw, dy, x, B, Cin, Cout, T, K, dilation, scratch, nt, group);
    }
    if (!xsum_empty(dbias)) conv_bias_grad_exact(dbias, dy_f32, B, Cout, T, group);
}

size_t conv1d_workspace_floats_fixed(int B, int Cin, int Cout, int T, int K, int dilation) {
    const size_t bytes = conv_schedule_bytes_fixed(&conv_operands_f32_fixed, B, Cin, Cout, T, K, dilation);
    return (bytes + sizeof(float) - 1) / sizeof(float);
}

void conv1d_forward_grouped(float *y, const float *x, const float *w, const float *bias, int B, int Cin, int Cout,
                            int T, int K, int dilation, float *workspace, int group) {
    const conv_tensor_t xt = {x, (size_t)Cin * T, (size_t)T};
    conv_schedule_forward_fixed(&conv_operands_f32_fixed, y, xt, w, bias, B, Cin, Cout, T, K, dilation, workspace,
                                group);
}

void conv1d_forward_fixed(float *y, const float *x, const float *w, const float *bias, int B, int Cin, int Cout, int T,
                          int K, int dilation, float *workspace) {
    conv1d_forward_grouped(y, x, w, bias, B, Cin, Cout, T, K, dilation, workspace, 1);
}

void conv1d_backward_exact(float *dx, int dx_accumulate, float *dw_tmp, xsum_t dw, xsum_t dbias, const float *dy,
                           const float *x, const float *w, int B, int Cin, int Cout, int T, int K, int dilation,
                           float *workspace, int group) {
    const conv_tensor_t dyt = {dy, (size_t)Cout * T, (size_t)T}, xt = {x, (size_t)Cin * T, (size_t)T};
    conv_schedule_backward_exact(&conv_operands_f32_fixed, dx, dx_accumulate, dw_tmp, dw, dbias, dy, dyt, xt, w, B, Cin,
                                 Cout, T, K, dilation, workspace, group);
}

void conv1d_forward_reference(float *y, const float *x, const float *w, const float *bias, int B, int Cin, int Cout,
                              int T, int K, int dilation) {
    conv_check_shape(B, Cin, Cout, T, K, dilation);
    const int p = conv_pad(K, dilation);
    for (int b = 0; b < B; b++)
        for (int co = 0; co < Cout; co++)
            for (int t = 0; t < T; t++) {
                double acc = bias ? bias[co] : 0.0;
                for (int ci = 0; ci < Cin; ci++)
                    for (int k = 0; k < K; k++) {
                        int u = t + k * dilation - p;  // index into the unpadded input
                        if (u < 0) u = -u;
                        if (u >= T) u = 2 * (T - 1) - u;
                        acc += (double)w[((size_t)co * Cin + ci) * K + k] * x[((size_t)b * Cin + ci) * T + u];
                    }
                y[((size_t)b * Cout + co) * T + t] = (float)acc;
            }
}
