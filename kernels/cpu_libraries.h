// The libraries under the CPU kernels, with their versions, for `spkddp --version`.
#pragma once
#include <stddef.h>

// "oneDNN 2.7.3 (avx2 kernels); OpenBLAS 0.3.21 (Zen kernels); 2 OpenMP threads", or what the
// build left out.
void spk_cpu_libraries(char *out, size_t cap);
