#include "app/train/memory_peaks.h"

#include "kernels/device.h"

#include <math.h>
#include <sys/resource.h>

void memory_peaks(const comm_t *comm, const spk_backend_t *be, double *rss_mib, double *device_mib) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double v[2] = {(double)ru.ru_maxrss / 1024.0, -1.0};  // Linux counts ru_maxrss in KiB
#ifdef SPKDDP_HAVE_CUDA
    if (be == spk_backend_cuda()) v[1] = (double)spk_cuda_bytes_in_use() / (1 << 20);
#else
    (void)be;
#endif
    comm_allreduce_max_f64(comm, v, 2);
    *rss_mib = v[0];
    *device_mib = v[1] >= 0 ? v[1] : NAN;
}
