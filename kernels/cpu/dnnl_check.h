// oneDNN's calls, checked: a failure names the call, the file and line and oneDNN's status, and
// ends the job (kernels/base/check.h). One engine for the process (the CPU).
//
// Both of oneDNN's C APIs build: 2.x (Debian 12's 2.6) and 3.x (later distributions, oneAPI,
// Intel's wheels), which replaced 2.x's memory descriptor structs with handles and its
// operation descriptors with one call per primitive descriptor. The few calls that differ have
// one spelling here: memory descriptors are handles (spk_md) in both, a heap copy of the struct
// under 2.x, and the primitive descriptors come from spk_conv_pd / spk_matmul_pd.
#pragma once
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <oneapi/dnnl/dnnl_version.h>
#include <stdlib.h>

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

#if DNNL_VERSION_MAJOR >= 3
typedef dnnl_memory_desc_t spk_md;         // owned: spk_md_free
typedef const_dnnl_memory_desc_t spk_cmd;  // borrowed (a primitive descriptor's query)
static inline spk_md spk_md_tag(int n, const dnnl_dims_t dims, dnnl_data_type_t dt, dnnl_format_tag_t tag) {
    spk_md md;
    dnnlCheck(dnnl_memory_desc_create_with_tag(&md, n, dims, dt, tag));
    return md;
}
static inline spk_md spk_md_strides(int n, const dnnl_dims_t dims, dnnl_data_type_t dt, const dnnl_dims_t strides) {
    spk_md md;
    dnnlCheck(dnnl_memory_desc_create_with_strides(&md, n, dims, dt, strides));
    return md;
}
static inline spk_md spk_md_clone(spk_cmd from) {
    spk_md md;
    dnnlCheck(dnnl_memory_desc_clone(&md, from));
    return md;
}
#else
typedef dnnl_memory_desc_t *spk_md;
typedef const dnnl_memory_desc_t *spk_cmd;
static inline spk_md spk_md_tag(int n, const dnnl_dims_t dims, dnnl_data_type_t dt, dnnl_format_tag_t tag) {
    spk_md md = mallocCheck(sizeof *md);
    dnnlCheck(dnnl_memory_desc_init_by_tag(md, n, dims, dt, tag));
    return md;
}
static inline spk_md spk_md_strides(int n, const dnnl_dims_t dims, dnnl_data_type_t dt, const dnnl_dims_t strides) {
    spk_md md = mallocCheck(sizeof *md);
    dnnlCheck(dnnl_memory_desc_init_by_strides(md, n, dims, dt, strides));
    return md;
}
static inline spk_md spk_md_clone(spk_cmd from) {
    spk_md md = mallocCheck(sizeof *md);
    *md = *from;
    return md;
}
#endif

// Frees *md (nothing when NULL) and clears it.
static inline void spk_md_free(spk_md *md) {
    if (!*md) return;
#if DNNL_VERSION_MAJOR >= 3
    dnnlCheck(dnnl_memory_desc_destroy(*md));
#else
    free(*md);
#endif
    *md = NULL;
}

// The convolution primitive descriptor of prop (dnnl_forward_training, dnnl_backward_data or
// dnnl_backward_weights) on src, w, bias (NULL: none) and dst, which are the gradients' where
// prop differentiates them; hint: the forward's, for the backward ones. oneDNN's status, so
// that the caller tells dnnl_unimplemented (no kernel for the shape) from failures.
static inline dnnl_status_t spk_conv_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t engine, dnnl_prop_kind_t prop,
                                        dnnl_alg_kind_t alg, spk_cmd src, spk_cmd w, spk_cmd bias, spk_cmd dst,
                                        const dnnl_dims_t strides, const dnnl_dims_t dilates, const dnnl_dims_t pad_l,
                                        const dnnl_dims_t pad_r, const_dnnl_primitive_desc_t hint,
                                        const_dnnl_primitive_attr_t attr) {
#if DNNL_VERSION_MAJOR >= 3
    if (prop == dnnl_backward_data)
        return dnnl_convolution_backward_data_primitive_desc_create(pd, engine, alg, src, w, dst, strides, dilates,
                                                                    pad_l, pad_r, hint, attr);
    if (prop == dnnl_backward_weights)
        return dnnl_convolution_backward_weights_primitive_desc_create(pd, engine, alg, src, w, bias, dst, strides,
                                                                       dilates, pad_l, pad_r, hint, attr);
    return dnnl_convolution_forward_primitive_desc_create(pd, engine, prop, alg, src, w, bias, dst, strides, dilates,
                                                          pad_l, pad_r, attr);
#else
    dnnl_convolution_desc_t d;
    dnnl_status_t st;
    if (prop == dnnl_backward_data)
        st = dnnl_dilated_convolution_backward_data_desc_init(&d, alg, src, w, dst, strides, dilates, pad_l, pad_r);
    else if (prop == dnnl_backward_weights)
        st = dnnl_dilated_convolution_backward_weights_desc_init(&d, alg, src, w, bias, dst, strides, dilates, pad_l,
                                                                 pad_r);
    else
        st = dnnl_dilated_convolution_forward_desc_init(&d, prop, alg, src, w, bias, dst, strides, dilates, pad_l,
                                                        pad_r);
    return st != dnnl_success ? st : dnnl_primitive_desc_create(pd, &d, attr, engine, hint);
#endif
}

// The matmul primitive descriptor c = a b (no bias).
static inline dnnl_status_t spk_matmul_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t engine, spk_cmd a, spk_cmd b,
                                          spk_cmd c, const_dnnl_primitive_attr_t attr) {
#if DNNL_VERSION_MAJOR >= 3
    return dnnl_matmul_primitive_desc_create(pd, engine, a, b, NULL, c, attr);
#else
    dnnl_matmul_desc_t d;
    const dnnl_status_t st = dnnl_matmul_desc_init(&d, a, b, NULL, c);
    return st != dnnl_success ? st : dnnl_primitive_desc_create(pd, &d, attr, engine, NULL);
#endif
}

// The attributes of spkddp's primitives: a scratchpad the caller provides and, where sum is set,
// a sum post-op (the primitive adds into its destination). The caller destroys them.
static inline dnnl_primitive_attr_t spk_dnnl_attr(int sum) {
    dnnl_primitive_attr_t attr;
    dnnlCheck(dnnl_primitive_attr_create(&attr));
    dnnlCheck(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (!sum) return attr;
    dnnl_post_ops_t ops;
    dnnlCheck(dnnl_post_ops_create(&ops));
#if DNNL_VERSION_MAJOR >= 3
    dnnlCheck(dnnl_post_ops_append_sum(ops, 1.0f, 0, dnnl_data_type_undef));
#else
    dnnlCheck(dnnl_post_ops_append_sum(ops, 1.0f));
#endif
    dnnlCheck(dnnl_primitive_attr_set_post_ops(attr, ops));  // (a copy of ops)
    dnnlCheck(dnnl_post_ops_destroy(ops));
    return attr;
}
