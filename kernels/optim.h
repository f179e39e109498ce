// Optimizer steps over one flat parameter buffer, with PyTorch (torch.optim, 1.13) semantics.
// No hidden state: the caller owns the state buffers and passes the 1-based step count
// (step = 1 on the first update). Hyperparameters are double, like the Python floats PyTorch
// takes; constants derived from them (1 - beta, bias corrections) are computed in double and
// rounded to float as PyTorch does. Elementwise, parallel, deterministic.
#pragma once
#include <stddef.h>
#include <stdint.h>

// torch.optim.SGD: d = g + weight_decay * p; with momentum != 0:
//   buf = (step == 1) ? d : momentum * buf + (1 - dampening) * d
//   d = nesterov ? d + momentum * buf : buf;      p -= lr * d.
// momentum_buf may be NULL when momentum == 0.
void sgd_step(float *params,        // (n)
              const float *grads,   // (n)
              float *momentum_buf,  // (n) state
              size_t n, double lr, double momentum, double dampening, double weight_decay, int nesterov, int64_t step);

// torch.optim.Adam (amsgrad = False): g = grad + weight_decay * p (coupled);
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
void adam_step(float *params, const float *grads,
               float *exp_avg,     // (n) state m
               float *exp_avg_sq,  // (n) state v
               size_t n, double lr, double beta1, double beta2, double eps, double weight_decay, int64_t step);

// torch.optim.AdamW: p *= (1 - lr * weight_decay) (decoupled), then the Adam update without
// weight decay in the gradient.
void adamw_step(float *params, const float *grads, float *exp_avg, float *exp_avg_sq, size_t n, double lr, double beta1,
                double beta2, double eps, double weight_decay, int64_t step);
