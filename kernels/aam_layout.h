// The AAM-softmax memory layouts, one for the CPU and CUDA kernels:
//   cache (forward -> backward):  probs (B, S) | cos_target (B) | enorm (B) | wnorm (S)
//                                 | ehat (B, E) | what (S, E)
//   workspace (backward):         dcos (B, S) | dehat (B, E) | dwhat (S, E)
// (the CUDA forward also keeps its per-row results at the start of the workspace).
#pragma once
#include <stddef.h>

#define AAM_NORM_EPS 1e-12f  // F.normalize's default floor of the norms

typedef struct {
    float *probs, *cos_target, *enorm, *wnorm, *ehat, *what;
} aam_cache_t;

static inline size_t aam_cache_floats(int B, int E, int S) {
    return (size_t)B * S + 2 * (size_t)B + S + (size_t)B * E + (size_t)S * E;
}

static inline aam_cache_t aam_cache_view(const float *cache, int B, int E, int S) {
    aam_cache_t c;
    float *p = (float *)cache;
    c.probs = p;
    p += (size_t)B * S;
    c.cos_target = p;
    p += B;
    c.enorm = p;
    p += B;
    c.wnorm = p;
    p += S;
    c.ehat = p;
    p += (size_t)B * E;
    c.what = p;
    return c;
}

static inline size_t aam_workspace_floats(int B, int E, int S) { return (size_t)B * S + (size_t)B * E + (size_t)S * E; }

typedef struct {
    float *dcos, *dehat, *dwhat;
} aam_workspace_t;

static inline aam_workspace_t aam_workspace_view(float *workspace, int B, int E, int S) {
    aam_workspace_t w;
    w.dcos = workspace;
    w.dehat = w.dcos + (size_t)B * S;
    w.dwhat = w.dehat + (size_t)B * E;
    return w;
}
