// SPK_HD marks per-element math shared by the CPU path and CUDA kernels, so CPU tests
// exercise the exact expressions the GPU runs.
#pragma once
#ifdef __CUDACC__
#define SPK_HD __host__ __device__ static inline
#else
#define SPK_HD static inline
#endif
