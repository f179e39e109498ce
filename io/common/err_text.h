// One sentence naming a file, written into the caller's buffer: how io/'s readers report bad
// input (the caller decides whether it ends the job).
#pragma once
#include "kernels/base/check.h"

#include <stddef.h>

typedef struct {
    const char *path;  // the file the sentence names
    char *err;         // where it goes
    size_t cap;
} err_text_t;

// Writes "PATH: " and the formatted reason into c->err; returns code.
int err_text_fail(const err_text_t *c, int code, const char *fmt, ...) SPK_PRINTF(3, 4);
