// A weight gradient's group terms from its units' rows, a wave of units at a time (the invariant
// mode's blocks of samples: kernels/cpu/conv2d.c's Winograd, kernels/cpu/conv2d_dnnl_fixed.c's
// plans). Units u0 .. u0 + n - 1 (rows[i] of len floats each) are added in order into their
// group's running sum (groups of `per` consecutive units; run carries a group that goes on into
// the next wave), and done(term, ctx) is called once a group is complete: term is run, or the
// unit's own row where a group is one unit. The sums are in unit order whichever waves hold them,
// as xsum_add sums a group's rows: the thread count and the wave do not show.
#pragma once
#include <stddef.h>

typedef void (*spk_group_done_fn)(const float *term, void *ctx);

static inline void spk_group_terms_fold(float *run, const float *rows, size_t len, int u0, int n, int per,
                                        spk_group_done_fn done, void *ctx) {
    for (int i = 0; i < n;) {  // each group's units in this wave: i .. i + m
        const int u = u0 + i, first = u % per == 0, m = n - i < per - u % per ? n - i : per - u % per;
        const float *r = rows + (size_t)i * len, *term = run;
        if (per == 1)  // the unit is the term
            term = r;
        else
#pragma omp parallel for simd schedule(static)
            for (size_t k = 0; k < len; k++) {
                float v = first ? r[k] : run[k];
                for (int j = first; j < m; j++) v += r[(size_t)j * len + k];
                run[k] = v;
            }
        if ((u + m) % per == 0) done(term, ctx);
        i += m;
    }
}
