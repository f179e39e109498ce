// Optimizer steps (PyTorch semantics); per-element math in kernels/elementwise_math.h.
#include "kernels/optim.h"

#include <math.h>

#include "kernels/base/spk_assert.h"
#include "kernels/elementwise_math.h"

#define PAR_MIN 32768

void sgd_step(float *params, const float *grads, float *momentum_buf, size_t n, double lr, double momentum,
              double dampening, double weight_decay, int nesterov, int64_t step) {
    SPK_ASSERT(step >= 1);
    SPK_ASSERT(momentum == 0.0 || momentum_buf != NULL);
    SPK_ASSERT(!nesterov || (momentum > 0.0 && dampening == 0.0));  // as torch.optim.SGD
    const float neg_lr = (float)(-lr), mom = (float)momentum;
    const float omd = (float)(1.0 - dampening), wd = (float)weight_decay;
    const int first = step == 1;
    float dummy = 0.0f;
    if (momentum == 0.0) {
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
        for (size_t i = 0; i < n; i++) spk_sgd_update(&params[i], &dummy, grads[i], neg_lr, 0.0f, omd, wd, 0, first);
        return;
    }
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        spk_sgd_update(&params[i], &momentum_buf[i], grads[i], neg_lr, mom, omd, wd, nesterov, first);
}

// Elements [i0, i1) with the weight decays' presence as constants: with them read inside the
// loop gcc did not vectorise it. The per-element arithmetic is the same either way.
#define ADAM_CHUNK 8192
static inline __attribute__((always_inline)) void adam_span(float *restrict params, const float *restrict grads,
                                                            float *restrict exp_avg, float *restrict exp_avg_sq,
                                                            size_t i0, size_t i1, float b1, float omb1, float b2,
                                                            float omb2, float epsf, float neg_step_size, float bc2_sqrt,
                                                            float wd, float decay, const int has_coupled,
                                                            const int has_decoupled) {
#pragma omp simd
    for (size_t i = i0; i < i1; i++) {
        float g = grads[i];
        if (has_coupled) g = g + wd * params[i];
        if (has_decoupled) params[i] = params[i] * decay;
        spk_adam_update(&params[i], &exp_avg[i], &exp_avg_sq[i], g, b1, omb1, b2, omb2, epsf, neg_step_size, bc2_sqrt);
    }
}

static void adam_common(float *params, const float *grads, float *exp_avg, float *exp_avg_sq, size_t n, double lr,
                        double beta1, double beta2, double eps, double coupled_wd, double decoupled_wd, int64_t step) {
    SPK_ASSERT(step >= 1);
    const double bc1 = 1.0 - pow(beta1, (double)step);
    const double bc2 = 1.0 - pow(beta2, (double)step);
    const float neg_step_size = (float)(-(lr / bc1));
    const float bc2_sqrt = (float)sqrt(bc2);
    const float b1 = (float)beta1, omb1 = (float)(1.0 - beta1);
    const float b2 = (float)beta2, omb2 = (float)(1.0 - beta2);
    const float epsf = (float)eps, wd = (float)coupled_wd;
    const float decay = (float)(1.0 - lr * decoupled_wd);
    const int has_coupled = coupled_wd != 0.0, has_decoupled = decoupled_wd != 0.0;
    const size_t chunks = (n + ADAM_CHUNK - 1) / ADAM_CHUNK;
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t k = 0; k < chunks; k++) {
        const size_t i0 = k * ADAM_CHUNK, i1 = i0 + ADAM_CHUNK < n ? i0 + ADAM_CHUNK : n;
#define SPAN(C, D)                                                                                               \
    adam_span(params, grads, exp_avg, exp_avg_sq, i0, i1, b1, omb1, b2, omb2, epsf, neg_step_size, bc2_sqrt, wd, \
              decay, C, D)
        if (has_coupled)
            has_decoupled ? SPAN(1, 1) : SPAN(1, 0);
        else
            has_decoupled ? SPAN(0, 1) : SPAN(0, 0);
#undef SPAN
    }
}

void adam_step(float *params, const float *grads, float *exp_avg, float *exp_avg_sq, size_t n, double lr, double beta1,
               double beta2, double eps, double weight_decay, int64_t step) {
    adam_common(params, grads, exp_avg, exp_avg_sq, n, lr, beta1, beta2, eps, weight_decay, 0.0, step);
}

void adamw_step(float *params, const float *grads, float *exp_avg, float *exp_avg_sq, size_t n, double lr, double beta1,
                double beta2, double eps, double weight_decay, int64_t step) {
    adam_common(params, grads, exp_avg, exp_avg_sq, n, lr, beta1, beta2, eps, 0.0, weight_decay, step);
}
