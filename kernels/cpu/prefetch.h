// Software prefetch for passes that stream more rows at once than the hardware prefetcher
// follows: the BatchNorms' (a channel's rows lie a sample apart, or a few channels a row wide).
#pragma once

#include <stddef.h>

// The cache lines of bytes from p, to be read (NULL: none). Always inlined: gcc 12 at -O2 finds
// a function of prefetches alone free of effects (ipa-pure-const) and drops every call to it
// that it has not inlined first.
__attribute__((always_inline)) static inline void spk_prefetch_read(const void *p, size_t bytes) {
    if (!p) return;
    const char *b = (const char *)p;
    for (size_t k = 0; k < bytes; k += 64) __builtin_prefetch(b + k, 0);
}

// The same, for lines about to be written (fetched for ownership ahead of the stores).
__attribute__((always_inline)) static inline void spk_prefetch_write(const void *p, size_t bytes) {
    if (!p) return;
    const char *b = (const char *)p;
    for (size_t k = 0; k < bytes; k += 64) __builtin_prefetch(b + k, 1);
}
