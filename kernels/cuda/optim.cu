// Optimizer steps on device (kernels/optim.h): the host forms the float constants from the
// double hyperparameters exactly as kernels/cpu/optim.c does; each element then runs the shared
// SPK_HD update (spk_sgd_update / spk_adam_update in kernels/elementwise_math.h).
#include "kernels/cuda/launch.cuh"

namespace {

__global__ void sgd_kernel(float *params, const float *grads, float *momentum_buf, size_t n, float neg_lr,
                           float momentum, float one_minus_dampening, float weight_decay, int nesterov, int first) {
    SPK_GRID_LOOP(i, n) {
        float p = params[i];
        float buf = momentum_buf ? momentum_buf[i] : 0.0f;
        spk_sgd_update(&p, &buf, grads[i], neg_lr, momentum, one_minus_dampening, weight_decay, nesterov, first);
        params[i] = p;
        if (momentum_buf) momentum_buf[i] = buf;
    }
}

struct AdamConsts {
    float neg_step_size, bc2_sqrt, b1, omb1, b2, omb2, eps, wd, decay;
    int has_coupled, has_decoupled;
};

__global__ void adam_kernel(float *params, const float *grads, float *exp_avg, float *exp_avg_sq, size_t n,
                            AdamConsts k) {
    SPK_GRID_LOOP(i, n) {
        float p = params[i], m = exp_avg[i], v = exp_avg_sq[i];
        float g = grads[i];
        if (k.has_coupled) g = g + k.wd * p;
        if (k.has_decoupled) p = p * k.decay;
        spk_adam_update(&p, &m, &v, g, k.b1, k.omb1, k.b2, k.omb2, k.eps, k.neg_step_size, k.bc2_sqrt);
        params[i] = p;
        exp_avg[i] = m;
        exp_avg_sq[i] = v;
    }
}

void adam_common(float *params, const float *grads, float *exp_avg, float *exp_avg_sq, size_t n, double lr,
                 double beta1, double beta2, double eps, double coupled_wd, double decoupled_wd, int64_t step) {
    SPK_ASSERT(step >= 1);
    if (n == 0) return;
    const double bc1 = 1.0 - pow(beta1, (double)step);
    const double bc2 = 1.0 - pow(beta2, (double)step);
    AdamConsts k;
    k.neg_step_size = (float)(-(lr / bc1));
    k.bc2_sqrt = (float)sqrt(bc2);
    k.b1 = (float)beta1;
    k.omb1 = (float)(1.0 - beta1);
    k.b2 = (float)beta2;
    k.omb2 = (float)(1.0 - beta2);
    k.eps = (float)eps;
    k.wd = (float)coupled_wd;
    k.decay = (float)(1.0 - lr * decoupled_wd);
    k.has_coupled = coupled_wd != 0.0;
    k.has_decoupled = decoupled_wd != 0.0;
    SPK_LAUNCH(adam_kernel, spk_grid(n), params, grads, exp_avg, exp_avg_sq, n, k);
}

}  // namespace

extern "C" void sgd_step_cuda(float *params, const float *grads, float *momentum_buf, size_t n, double lr,
                              double momentum, double dampening, double weight_decay, int nesterov, int64_t step) {
    SPK_ASSERT(step >= 1);
    SPK_ASSERT(momentum == 0.0 || momentum_buf != NULL);
    SPK_ASSERT(!nesterov || (momentum > 0.0 && dampening == 0.0));  // as torch.optim.SGD
    if (n == 0) return;
    const float neg_lr = (float)(-lr), omd = (float)(1.0 - dampening), wd = (float)weight_decay;
    const int first = step == 1;
    // momentum == 0: no buffer is read or written (the CPU passes momentum 0, nesterov 0)
    const int use_buf = momentum != 0.0;
    SPK_LAUNCH(sgd_kernel, spk_grid(n), params, grads, use_buf ? momentum_buf : nullptr, n, neg_lr,
               use_buf ? (float)momentum : 0.0f, omd, wd, use_buf ? nesterov : 0, first);
}

extern "C" void adam_step_cuda(float *params, const float *grads, float *exp_avg, float *exp_avg_sq, size_t n,
                               double lr, double beta1, double beta2, double eps, double weight_decay, int64_t step) {
    adam_common(params, grads, exp_avg, exp_avg_sq, n, lr, beta1, beta2, eps, weight_decay, 0.0, step);
}

extern "C" void adamw_step_cuda(float *params, const float *grads, float *exp_avg, float *exp_avg_sq, size_t n,
                                double lr, double beta1, double beta2, double eps, double weight_decay, int64_t step) {
    adam_common(params, grads, exp_avg, exp_avg_sq, n, lr, beta1, beta2, eps, 0.0, weight_decay, step);
}
