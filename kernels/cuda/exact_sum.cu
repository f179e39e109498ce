// Exact sums (kernels/exact_sum.h) on the GPU: one thread per sum, adding its terms in row order
// with the CPU's deposit (kernels/exact_sum_math.h), so the sums, and the floats they round to,
// are bitwise the CPU's. Also the raise to agreed bins on a caller's stream, for NCCL.
#include "kernels/cuda/exact_sum_stream.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/exact_sum_math.h"

// Device-side checks stay on in release builds, like SPK_ASSERT (kernels/base/spk_assert.h).
#undef NDEBUG
#include <assert.h>

namespace {

__global__ void xsum_zero_kernel(xsum_t s, int64_t n) {
    SPK_GRID_LOOP(i, n) {
        s.bin[i] = 0;
        s.hi[i] = 0;
        s.lo[i] = 0;
    }
}

__global__ void xsum_add_kernel(xsum_t s, const float *x, int rows, int64_t n, int group) {
    SPK_GRID_LOOP(i, n) {
        int J = s.bin[i];
        int64_t hi = s.hi[i], lo = s.lo[i];
        for (int r = 0; r < rows; r += group) {
            float g = x[(size_t)r * n + i];  // the group's rows, added in order: one term
            for (int k = 1; k < group; k++) g += x[(size_t)(r + k) * n + i];
            xsum_deposit(&J, &hi, &lo, (double)g);
        }
        s.bin[i] = (int8_t)J;
        s.hi[i] = hi;
        s.lo[i] = lo;
    }
}

__global__ void xsum_to_float_kernel(float *y, xsum_t s, int64_t n) {
    SPK_GRID_LOOP(i, n) y[i] = (float)xsum_value(s.bin[i], s.hi[i], s.lo[i]);
}

__global__ void xsum_rows_add_kernel(xsum_t dst, xsum_t src, const int *idx, int64_t len, size_t n) {
    SPK_GRID_LOOP(k, n) {
        const size_t j = k / len, i = k - j * len, d = (size_t)idx[j] * len + i;
        int J = dst.bin[d];
        xsum_merge_into(&J, &dst.hi[d], &dst.lo[d], src.bin[k], src.hi[k], src.lo[k]);
        dst.bin[d] = (int8_t)J;
    }
}

__global__ void xsum_raise_kernel(xsum_t s, const int8_t *bin, int64_t n) {
    SPK_GRID_LOOP(i, n) {
        int J = s.bin[i];
        int64_t hi = s.hi[i], lo = s.lo[i];
        xsum_raise(&J, &hi, &lo, bin[i]);
        s.bin[i] = (int8_t)J;
        s.hi[i] = hi;
        s.lo[i] = lo;
    }
}

// w[i] <- the word of s[i] (kernels/exact_sum_math.h); w may be s.hi's memory, as each thread
// reads its sum before it writes the word.
__global__ void xsum_to_words_kernel(uint64_t *w, xsum_t s, int64_t n) {
    SPK_GRID_LOOP(i, n) {
        const uint64_t word = xsum_word(s.bin[i], s.hi[i], s.lo[i]);
        w[i] = word;
    }
}

// y[i] <- own[i] merged with rows[k * n + i], k < rows, rounded to float as xsum_words_to_float
// rounds a word. The caller's sums take at most 32 terms, so no merge overflows: one that does
// means a wrong count (model_plan_update), and stops the run with a device-side assertion, as
// SPK_ASSERT does on the CPU, rather than training on the NaN it would give.
__global__ void xsum_words_round_kernel(float *y, const uint64_t *own, const uint64_t *rows, int nrows, int64_t n) {
    SPK_GRID_LOOP(i, n) {
        uint64_t w = own[i];
        for (int k = 0; k < nrows; k++) w = xsum_word_merge(w, rows[(size_t)k * n + i]);
        assert(xsum_word_code(w) != XSUM_WORD_OVER);
        y[i] = (float)xsum_word_value(w);
    }
}

}  // namespace

extern "C" void xsum_zero_cuda(xsum_t s, int64_t n) {
    SPK_ASSERT(n >= 0);
    if (n > 0) SPK_LAUNCH(xsum_zero_kernel, spk_grid((size_t)n), s, n);
}

extern "C" void xsum_add_cuda(xsum_t s, const float *x, int rows, int64_t n, int group) {
    SPK_ASSERT(n >= 0 && rows >= 0 && group > 0 && rows % group == 0);
    if (n > 0 && rows > 0) SPK_LAUNCH(xsum_add_kernel, spk_grid((size_t)n), s, x, rows, n, group);
}

extern "C" void xsum_to_float_cuda(float *y, xsum_t s, int64_t n) {
    if (n > 0) SPK_LAUNCH(xsum_to_float_kernel, spk_grid((size_t)n), y, s, n);
}

extern "C" void xsum_rows_add_cuda(xsum_t dst, xsum_t src, const int *idx, int n, int64_t len) {
    SPK_ASSERT(n >= 0 && len >= 0);
    const size_t total = (size_t)n * (size_t)len;
    if (total > 0) SPK_LAUNCH(xsum_rows_add_kernel, spk_grid(total), dst, src, idx, len, total);
}

extern "C" void xsum_raise_to_cuda_stream(struct CUstream_st *stream, xsum_t s, const int8_t *bin, int64_t n) {
    if (n <= 0) return;
    xsum_raise_kernel<<<spk_grid((size_t)n), SPK_CUDA_THREADS, 0, stream>>>(s, bin, n);
    SPK_CUDA_LAUNCHED();
}

extern "C" void xsum_to_words_cuda_stream(struct CUstream_st *stream, uint64_t *w, xsum_t s, int64_t n) {
    if (n <= 0) return;
    xsum_to_words_kernel<<<spk_grid((size_t)n), SPK_CUDA_THREADS, 0, stream>>>(w, s, n);
    SPK_CUDA_LAUNCHED();
}

extern "C" void xsum_words_round_cuda_stream(struct CUstream_st *stream, float *y, const uint64_t *own,
                                             const uint64_t *rows, int nrows, int64_t n) {
    if (n <= 0) return;
    xsum_words_round_kernel<<<spk_grid((size_t)n), SPK_CUDA_THREADS, 0, stream>>>(y, own, rows, nrows, n);
    SPK_CUDA_LAUNCHED();
}
