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
#pragma omp parallel for simd schedule(dynamic, 8192) if (n >= PAR_MIN)
        for (size_t i = 0; i < n; i++) spk_sgd_update(&params[i], &dummy, grads[i], neg_lr, 0.0f, omd, wd, 0, first);
        return;
    }
#pragma omp parallel for simd schedule(dynamic, 8192) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        spk_sgd_update(&params[i], &momentum_buf[i], grads[i], neg_lr, mom, omd, wd, nesterov, first);
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
#pragma omp parallel for simd schedule(dynamic, 8192) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float g = grads[i];
        if (has_coupled) g = g + wd * params[i];
        if (has_decoupled) params[i] = params[i] * decay;
        spk_adam_update(&params[i], &exp_avg[i], &exp_avg_sq[i], g, b1, omb1, b2, omb2, epsf, neg_step_size, bc2_sqrt);
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
