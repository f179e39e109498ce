// What kernels/cpu runs on (kernels/cpu_libraries.h): oneDNN's version and the instruction set
// its kernels use on this CPU, OpenBLAS's build and the kernels it picked, OpenMP's threads.
#include "kernels/cpu_libraries.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>

#ifdef SPK_USE_DNNL
#include <oneapi/dnnl/dnnl.h>

static const char *isa_name(dnnl_cpu_isa_t isa) {
    switch (isa) {
        case dnnl_cpu_isa_avx512_core_amx:
            return "avx512_core_amx";
        case dnnl_cpu_isa_avx512_core_bf16:
            return "avx512_core_bf16";
        case dnnl_cpu_isa_avx512_core_vnni:
            return "avx512_core_vnni";
        case dnnl_cpu_isa_avx512_core:
            return "avx512_core";
        case dnnl_cpu_isa_avx2_vnni:
            return "avx2_vnni";
        case dnnl_cpu_isa_avx2:
            return "avx2";
        default:
            return "older";
    }
}
#endif

void spk_cpu_libraries(char *out, size_t cap) {
    char dnn[96];
#ifdef SPK_USE_DNNL
    const dnnl_version_t *v = dnnl_version();
    snprintf(dnn, sizeof dnn, "oneDNN %d.%d.%d (%s kernels)", v->major, v->minor, v->patch,
             isa_name(dnnl_get_effective_cpu_isa()));
#else
    snprintf(dnn, sizeof dnn, "oneDNN not used");
#endif
    // openblas_get_config(): "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64"
    char version[32] = "?";
    sscanf(openblas_get_config(), "OpenBLAS %31s", version);
    snprintf(out, cap, "%s; OpenBLAS %s (%s kernels); %d OpenMP threads", dnn, version, openblas_get_corename(),
             omp_get_max_threads());
}
