// Software prefetch for passes that stream more rows at once than the hardware prefetcher
// follows: BatchNorm1d's (a channel's rows of a (B, C, T) array lie a sample apart, a few
// hundred bytes each) and BatchNorm2d's (rows a few channels wide). Folding (B, C, T) into bf16
// operands reads the same way but gained nothing from it (0.99x on one thread, 1.01x on two).
#pragma once

#include <stddef.h>

// How many rows of row_bytes ahead a pass asks for to be ahead_bytes on (at least one).
static inline int spk_prefetch_rows_ahead(size_t row_bytes, size_t ahead_bytes) {
    return row_bytes >= ahead_bytes ? 1 : (int)(ahead_bytes / row_bytes);
}

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
