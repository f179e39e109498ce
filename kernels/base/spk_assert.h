// Assertions that stay on in release builds. They guard programming errors (shapes that
// cannot happen), not bad input: bad input gets a named, one-line error from the caller.
#pragma once
#include <stdio.h>
#include <stdlib.h>

#define SPK_ASSERT(cond)                                                                                            \
    do {                                                                                                            \
        if (!(cond)) {                                                                                              \
            fprintf(stderr, "spkddp: internal error at %s:%d: assertion '%s' failed\n", __FILE__, __LINE__, #cond); \
            abort();                                                                                                \
        }                                                                                                           \
    } while (0)
