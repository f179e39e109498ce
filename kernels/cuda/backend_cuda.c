// The CUDA backend: the `_cuda` siblings of kernels/cuda (declared in kernels/cuda/ops.h with the
// CPU functions' types) on device memory. Every op queues on spk_cuda_stream(); upload and
// download wait for it.
#include "kernels/backend.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/staging.h"

static void *device_alloc(size_t bytes) {
    void *p = spk_cuda_malloc(bytes ? bytes : 1);
    spk_cuda_memset0(p, bytes ? bytes : 1);
    return p;
}

#define SPK_CUDA_OP(name) .name = name##_cuda,

static const spk_backend_t cuda_backend = {.name = "cuda",
                                           .separate_memory = 1,
                                           .bn_fixed_order = 1,
                                           .alloc = device_alloc,
                                           .free = spk_cuda_free,
                                           .upload = spk_cuda_upload,
                                           .download = spk_cuda_download,
                                           .sync = spk_cuda_sync,
                                           .staging_create = spk_cuda_staging_create,
                                           SPK_STAGING_MEMBERS(spk_cuda_staging),
                                           SPK_BACKEND_OPS(SPK_CUDA_OP)};

const spk_backend_t *spk_backend_cuda(void) { return &cuda_backend; }

#define SPK_CUDA_REPLACE(name, replacement) twin.name = replacement##_cuda;

const spk_backend_t *spk_backend_cuda_invariant(void) {
    static spk_backend_t twin;  // made on first use, from the thread that builds the models
    if (!twin.invariant) {
        twin = cuda_backend;
        twin.invariant = 1;
        SPK_INVARIANT_OPS(SPK_CUDA_REPLACE)
    }
    return &twin;
}
