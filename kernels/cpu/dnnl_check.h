// oneDNN's calls, checked: a failure names the call, the file and line and oneDNN's status, and
// ends the job (kernels/base/check.h). One engine for the process (the CPU).
#pragma once
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "kernels/base/check.h"

// Whether oneDNN's effective ISA (the CPU's, or ONEDNN_MAX_CPU_ISA's below it) includes isa.
static inline int spk_dnnl_isa_has(dnnl_cpu_isa_t isa) {
    return ((unsigned)dnnl_get_effective_cpu_isa() & (unsigned)isa) == (unsigned)isa;
}

#define dnnlCheck(call)                                                                          \
    do {                                                                                         \
        dnnl_status_t st_ = (call);                                                              \
        if (st_ != dnnl_success)                                                                 \
            spk_die_at(__FILE__, __LINE__, SPK_EXIT_FAILURE, "oneDNN call %s failed: %s", #call, \
                       dnnl_status2str(st_));                                                    \
    } while (0)
