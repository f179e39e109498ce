// The AAM-softmax forward -> backward cache, one layout for the CPU and CUDA kernels:
//   probs (B, S) | cos_target (B) | enorm (B) | wnorm (S) | ehat (B, E) | what (S, E)
#pragma once
#include <stddef.h>

typedef struct {
    float *probs, *cos_target, *enorm, *wnorm, *ehat, *what;
} aam_cache_t;

static inline size_t aam_cache_floats(int B, int E, int S) {
    return (size_t)B * S + 2 * (size_t)B + S + (size_t)B * E + (size_t)S * E;
}

static inline aam_cache_t aam_cache_view(const float* cache, int B, int E, int S) {
    aam_cache_t c;
    float* p = (float*)cache;
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
