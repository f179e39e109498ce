// The CUDA library's calls that reach both the context (kernels/cuda/context.cu) and the
// convolution plans (kernels/cuda/conv_plans.cu), declared in kernels/device.h: a file above
// the two, so that the context never calls into the plans that use its handles.
#include "kernels/cuda/context.h"

extern "C" void spk_cuda_shutdown(void) {
    if (!spk_cuda_context_ready()) return;
    spk_cuda_sync();
    spk_conv1d_cuda_set_tf32(0);  // a later init starts in plain fp32, like cuBLAS
    spk_conv1d_cuda_release_plans();
    spk_cuda_context_release();
}

extern "C" void spk_cuda_set_tf32(int allow) {
    spk_cublas_set_tf32(allow);
    spk_conv1d_cuda_set_tf32(allow);
}
