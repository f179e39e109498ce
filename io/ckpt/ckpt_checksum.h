// Checkpoint checksums.
//   format 2: XXH3-64 over a canonical walk of the whole file: every attribute of every
//             object (the root's `checksum` excepted) and every dataset, in name order, each
//             as (kind, name, type class, element size, dims, values). A flipped bit in any
//             dataset or attribute changes it, and so does adding, removing or renaming one.
//   format 1: FNV-1a over the position and the stored floats only (what 3490411 and earlier
//             wrote; still verified when such a file is loaded).
#pragma once
#include "io/ckpt/ckpt_format.h"

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

// 0, or -1 with a sentence in err (an object spkddp cannot hash: a link that is not a plain
// one, a type that is not a number or a string, declared values that are not stored).
int ckpt_checksum_v2(hid_t f, uint64_t *sum, char *err, size_t cap);
// opt: the optimizer slots stored in the file (opt_n floats).
uint64_t ckpt_checksum_v1(const ckpt_meta_t *m, const ckpt_tensors_t *t, const float *opt, size_t opt_n);
