// DINO's cross-entropy between teacher and student views (Caron et al. 2021, multi-crop), for B
// utterances of V student views each, the first Vg of which (1 <= Vg <= V, V >= 2) are also the
// teacher's views (the same crops):
//   pt[u,g] = softmax((t[u,g] - centre) * inv_tau_t)        g < Vg
//   ps[u,v] = softmax(s[u,v] * inv_tau_s)                   v < V
//   row_loss[u] = 1/P sum_{g < Vg} sum_{v < V, v != g} -sum_k pt[u,g,k] log ps[u,v,k],
//   P = Vg (V - 1) pairs.
// The teacher takes no gradient (stop-gradient); ds is the student logits' gradient:
//   ds[u,v] = grad_scale * inv_tau_s / P * (n_v ps[u,v] - sum_{g < Vg, g != v} pt[u,g]),
//   n_v = the number of g < Vg other than v.
// Softmaxes subtract the row maximum; log ps is formed as (a - max) - log(sum), never log(0).
// Every row is computed on its own with fixed-order sums, so an utterance's loss and gradient
// depend neither on B nor on the thread count, and a call repeated gives the same bits (the
// caller may also process the utterances in chunks).
#pragma once
#include <stddef.h>

// The workspace's layout, the same on every backend: the teacher's probabilities pt (B*Vg, K),
// then the student rows' losses (B*V). K = 65536, Vg = 2: 512 KiB per utterance.
static inline size_t dino_xent_work_floats(int B, int V, int Vg, int K) { return (size_t)B * Vg * K + (size_t)B * V; }

size_t dino_xent_workspace_floats(int B, int V, int Vg, int K);

void dino_xent(float *row_loss,      // (B) out: utterance u's mean loss over its P pairs
               float *ds,            // (B*V, K) out (overwritten): grad_scale * d(sum_u row_loss[u]) / d s
               const float *s,       // (B*V, K) student logits; row u*V + v is view v of utterance u
               const float *t,       // (B*Vg, K) teacher logits; row u*Vg + g is view g of utterance u
               const float *centre,  // (K) subtracted from the teacher logits
               int B, int V, int Vg, int K, float inv_tau_s, float inv_tau_t, float grad_scale,
               float *work);  // (dino_xent_workspace_floats)
