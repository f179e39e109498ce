// Per-epoch metrics as JSON lines: one object per epoch (and, in a file of their own, per
// step), appended by rank 0 and flushed to disk, so a job killed at any moment leaves whole
// lines. On resume, lines of epochs (steps) that will be trained again are dropped first, so
// every epoch (step) appears exactly once.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char buf[2048];
    size_t len;
} json_line_t;

void json_begin(json_line_t *j);
void json_int(json_line_t *j, const char *key, int64_t v);
void json_num(json_line_t *j, const char *key, double v);  // %.9g; NaN/Inf become null
void json_end(json_line_t *j);

void metrics_append(const char *path, const json_line_t *j);
// 0 when `path` is absent, empty or a file of JSON lines (each starting with '{'); else the
// 1-based number of the first line that is not one, which a rewrite would drop.
int64_t metrics_file_foreign(const char *path);
// Keeps only lines whose "epoch" is below `epoch` (atomic rewrite). No file: nothing to do.
void metrics_truncate_from(const char *path, int64_t epoch);
// The same for per-step lines: keeps those whose "global_step" is at most global_step.
void metrics_truncate_after_step(const char *path, int64_t global_step);
