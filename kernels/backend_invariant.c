// spk_backend_invariant (kernels/backend.h): the world-size-invariant twin of whichever backend.
// The CPU backends' twins are made in kernels/cpu/backend_cpu.c, the CUDA one's in
// kernels/cuda/backend_cuda.c; this chooser is a file of its own, so that the backends, which
// include kernels/backend.h, are not called back by the file of the header they implement.
#include "kernels/backend.h"

#include "kernels/base/spk_assert.h"

const spk_backend_t *spk_backend_invariant(const spk_backend_t *be) {
    if (be->invariant) return be;
    if (be == &spk_backend_cpu || be == &spk_backend_cpu_staged) return spk_backend_cpu_invariant(be);
    SPK_ASSERT(be == spk_backend_cuda());
    return spk_backend_cuda_invariant();
}
