// Threads inside a rank (OpenMP kernels, OpenBLAS, oneDNN). Ranks sharing a node split its
// cores: SPKDDP_THREADS, else OMP_NUM_THREADS, else cores / ranks-on-this-node (at least 1).
// Oversubscribing cores with spinning OpenMP and BLAS threads from several ranks is the
// classic way to make a data-parallel job ten times slower.
#pragma once

// Returns the thread count chosen for this rank.
int threads_configure(int local_ranks);
