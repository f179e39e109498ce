// The CUDA backend's entry points as one table (kernels/cuda_module.h): the only symbol the
// module libspkddp_cuda.so exports.
#include "kernels/cuda_module.h"

#define SPK_CUDA_MODULE_INIT(name) .name = name,

const spk_cuda_module_t spk_cuda_module_table = {.size = sizeof(spk_cuda_module_t),
                                                 SPK_CUDA_MODULE_ENTRIES(SPK_CUDA_MODULE_INIT)};
