// Sentences naming a file (io/common/err_text.h).
#include "io/common/err_text.h"

#include <stdarg.h>
#include <stdio.h>

int err_text_fail(const err_text_t *c, int code, const char *fmt, ...) {
    int n = snprintf(c->err, c->cap, "%s: ", c->path);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < c->cap) vsnprintf(c->err + n, c->cap - (size_t)n, fmt, ap);
    va_end(ap);
    return code;
}
