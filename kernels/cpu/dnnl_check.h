// oneDNN's calls, checked: a failure names the call, the file and line and oneDNN's status, and
// ends the job (kernels/base/check.h). One engine for the process (the CPU).
#pragma once
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "kernels/base/check.h"

#define dnnlCheck(call)                                                                          \
    do {                                                                                         \
        dnnl_status_t st_ = (call);                                                              \
        if (st_ != dnnl_success)                                                                 \
            spk_die_at(__FILE__, __LINE__, SPK_EXIT_FAILURE, "oneDNN call %s failed: %s", #call, \
                       dnnl_status2str(st_));                                                    \
    } while (0)
