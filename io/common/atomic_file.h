// Files that appear whole or not at all: the bytes go to a hidden temp file beside the
// target (DIR/.NAME.tmp), are fsynced, and the temp file is renamed into place; then the
// directory is fsynced so the rename survives a crash. On any failure (a full disk, a quota,
// a read-only directory) the temp file is removed and nothing at the target changes.
#pragma once
#include <stddef.h>
#include <stdio.h>

typedef enum {
    ATOMIC_REPLACE,     // an existing file at the target is replaced
    ATOMIC_NO_REPLACE,  // an existing file at the target is an error, and stays as it was
} atomic_mode_t;

// 0, or -1 with one sentence in err naming the target and the reason, and errno set
// (EEXIST: the target exists and mode was ATOMIC_NO_REPLACE).
int atomic_write_file(const char *path, const void *buf, size_t n, atomic_mode_t mode, char *err, size_t cap);
// rename(2) that never replaces an existing target: 0, or -1 with errno (EEXIST).
int atomic_rename_no_replace(const char *from, const char *to);
// write(2) until all n bytes are out (EINTR retried): 0, or -1 with errno (ENOSPC when the
// device takes nothing more).
int file_write_all(int fd, const char *p, size_t n);
// The temp name atomic_write_file uses for path ("d/x.h5" -> "d/.x.h5.tmp").
void atomic_temp_path(const char *path, char *out, size_t cap);

// A text file assembled in memory, then written with atomic_write_file (replacing).
typedef struct {
    FILE *f;  // write the text here
    char *buf;
    size_t n;
} atomic_text_t;
void atomic_text_open(atomic_text_t *t);
// 0, or -1 with a sentence in err; either way t is released.
int atomic_text_commit(atomic_text_t *t, const char *path, char *err, size_t cap);
