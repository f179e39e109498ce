// Softmax cross-entropy over logits with integer labels, mean over the batch.
// Numerically stable (max subtracted). `correct` counts argmax == label (first max on ties).
#pragma once

void xent_forward(float *loss,          // scalar out: mean_b (logsumexp(z_b) - z_b[label_b])
                  int *correct,         // scalar out
                  float *probs,         // (B, N) out: softmax, kept for backward
                  const float *logits,  // (B, N)
                  const int *labels,    // (B) in [0, N)
                  int B, int N);

// dlogits += dloss / B * (probs - onehot(label)). dlogits must not alias probs.
void xent_backward(float *dlogits,  // (B, N) +=
                   float dloss,
                   const float *probs,  // (B, N) from forward
                   const int *labels,   // (B)
                   int B, int N);
