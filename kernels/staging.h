// The staging handle of the backends (kernels/backend.h describes its calls): double-buffered
// traffic between the host and a backend's kernels, one slot per batch, used in turn
// (kernels/cpu/staging.c, kernels/cuda/staging.cu). C and C++.
#pragma once
#include <stddef.h>

typedef struct spk_staging spk_staging_t;
#define SPK_STAGING_ALIGN       256  // each piece put into a slot starts at a multiple of this
#define SPK_STAGING_FETCH_BYTES 64   // the most one slot fetches back

// A backend's staging functions, named prefix_create, prefix_free, ...: their declarations,
// and the members of a backend table they fill (all but staging_create).
#define SPK_STAGING_DECLARE(prefix)                                             \
    spk_staging_t *prefix##_create(void);                                       \
    void prefix##_free(spk_staging_t *s);                                       \
    void prefix##_begin(spk_staging_t *s, size_t bytes);                        \
    const void *prefix##_put(spk_staging_t *s, const void *host, size_t bytes); \
    void prefix##_ready(spk_staging_t *s);                                      \
    void prefix##_fetch(spk_staging_t *s, const void *src, size_t bytes);       \
    const void *prefix##_fetched(spk_staging_t *s, int age);
#define SPK_STAGING_MEMBERS(prefix)                                                              \
    .staging_free = prefix##_free, .staging_begin = prefix##_begin, .staging_put = prefix##_put, \
    .staging_ready = prefix##_ready, .staging_fetch = prefix##_fetch, .staging_fetched = prefix##_fetched
