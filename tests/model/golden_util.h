// Reading a golden file of tests/golden (golden_common.py's layout) and comparing a model's
// tensors with it, for tests/model/test_*_golden.c.
#pragma once
#include "app/model/layers/aam_encoder.h"
#include "app/model/model.h"
#include "io/common/h5util.h"
#include "kernels/aam_softmax.h"
#include "tests/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double worst = 0.0;  // the largest error compared so far

static double rel_err(const float *a, const float *ref, int64_t n) {
    double dd = 0, rr = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)ref[i];
        dd += d * d;
        rr += (double)ref[i] * ref[i];
    }
    return sqrt(dd) / fmax(sqrt(rr), 1e-30);
}

static void compare(const char *what, const float *a, const float *ref, int64_t n, double tol) {
    double e = rel_err(a, ref, n);
    if (e > worst) worst = e;
    EXPECT(e <= tol, "%s: relative error %.3g > %.0e", what, e, tol);
}

static float *read_floats(hid_t f, const char *name, int64_t n) {
    hsize_t dims[4] = {0};
    int r = h5_dataset_shape(f, name, dims, 4);
    int64_t have = 1;
    for (int i = 0; i < r; i++) have *= (int64_t)dims[i];
    if (r < 0 || have != n) {
        fprintf(stderr, "golden: %s missing or has %lld values, want %lld\n", name, (long long)have, (long long)n);
        exit(1);
    }
    float *buf = malloc((size_t)n * sizeof(float));
    h5_read_array(f, name, H5T_NATIVE_FLOAT, buf, "golden");
    return buf;
}

static void load_table(hid_t f, const char *group, const param_table_t *t, float *dst) {
    char name[256];
    for (int i = 0; i < t->count; i++) {
        snprintf(name, sizeof name, "%s/%s", group, t->t[i].name);
        float *v = read_floats(f, name, t->t[i].numel);
        memcpy(dst + t->t[i].offset, v, (size_t)t->t[i].numel * sizeof(float));
        free(v);
    }
}

// A model family's encoder as the golden check drives it: forward (returning the embeddings),
// backward with the input's gradient, and the name of a parameter whose gradient vanishes in
// exact arithmetic (NULL: none).
typedef struct {
    const float *(*forward)(model_t *m, const float *x, int B, int T, int train);
    void (*backward)(model_t *m, const float *g_emb, float *dframes, int B, int T);
    const char *vanishing;
    // The tolerance of each gradient tensor on its own (0: tol), for deep networks whose float32
    // step flips a few ReLUs sitting within rounding of their kink (PyTorch's own float32 step
    // does too), each flip moving a tensor's gradient by one whole term. The gradient of all
    // parameters together, and the input's, are held to tol, or to twice the distance of
    // PyTorch's own float32 step from the float64 reference where the file records it
    // (torch_f32_grad_error, torch_f32_input_grad_error: make_campplus_golden.py).
    double tensor_tol;
} golden_encoder_t;

// The golden check of the model make(f) builds from the file's attributes (on the CPU): its
// parameters and statistics loaded, eval-mode embeddings, then one training step (embeddings,
// loss, every parameter gradient, the input gradient, the running statistics after it), each
// tensor within `tol` (normwise relative error). Returns the test's exit code.
static inline int golden_run(const char *path, const char *label, model_t *(*make)(hid_t f), golden_encoder_t enc,
                             double tol) {
    h5_quiet();
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) {
        fprintf(stderr, "cannot open %s\n", path);
        return 1;
    }
    int64_t F, E, S, B, T;
    h5_attr_read_i64(f, "F", &F);
    h5_attr_read_i64(f, "emb_dim", &E);
    h5_attr_read_i64(f, "num_speakers", &S);
    h5_attr_read_i64(f, "batch", &B);
    h5_attr_read_i64(f, "frames", &T);
    model_t *m = make(f);
    aam_encoder_t *h = m->impl;  // every encoder family's impl starts with its head
    load_table(f, "params", &m->table, m->params);
    load_table(f, "state", &m->state_table, m->state);

    float *input = read_floats(f, "input", B * T * F);
    int32_t *labels = malloc((size_t)B * sizeof(int32_t));
    h5_read_array(f, "labels", H5T_NATIVE_INT32, labels, path);
    aam_encoder_reserve(m, (int)B, (int)T);

    // Eval mode first: it uses the running statistics as stored.
    const float *emb = enc.forward(m, input, (int)B, (int)T, 0);
    float *ref = read_floats(f, "emb_eval", B * E);
    compare("emb_eval", emb, ref, B * E, tol);
    free(ref);

    // One training step: forward, AAM loss, backward (with the input gradient).
    emb = enc.forward(m, input, (int)B, (int)T, 1);
    ref = read_floats(f, "emb", B * E);
    compare("emb", emb, ref, B * E, tol);
    free(ref);
    float loss = 0;
    int correct = 0;
    aam_softmax_forward(&loss, &correct, h->aam_cache, emb, m->params + h->cls_w, labels, (int)B, (int)E, (int)S,
                        h->margin, h->scale, h->work);
    float *ref_loss = read_floats(f, "loss", 1);
    compare("loss", &loss, ref_loss, 1, tol);
    float *dframes = calloc((size_t)(B * T * F), sizeof(float));
    memset(m->grads, 0, (size_t)m->table.total * sizeof(float));
    memset(h->g_emb, 0, (size_t)(B * E) * sizeof(float));
    aam_softmax_backward(h->g_emb, m->grads + h->cls_w, 1.0f, h->aam_cache, emb, m->params + h->cls_w, labels, (int)B,
                         (int)E, (int)S, h->margin, h->scale, h->work);
    enc.backward(m, h->g_emb, dframes, (int)B, (int)T);

    char name[256];
    double gworst = 0, all_dd = 0, all_rr = 0;
    const double ttol = enc.tensor_tol > 0 ? enc.tensor_tol : tol;
    double gtol = tol, xtol = tol, f32 = 0;
    if (H5Aexists(f, "torch_f32_grad_error") > 0 && h5_attr_read_f64(f, "torch_f32_grad_error", &f32) == 0)
        gtol = fmax(tol, 2 * f32);
    if (H5Aexists(f, "torch_f32_input_grad_error") > 0 && h5_attr_read_f64(f, "torch_f32_input_grad_error", &f32) == 0)
        xtol = fmax(tol, 2 * f32);
    for (int i = 0; i < m->table.count; i++) {
        const param_tensor_t *t = &m->table.t[i];
        snprintf(name, sizeof name, "grads/%s", t->name);
        ref = read_floats(f, name, t->numel);
        if (enc.vanishing && strcmp(t->name, enc.vanishing) == 0) {
            // e.g. a bias before a softmax over time, which is invariant to a per-channel shift:
            // exactly zero, up to rounding on both sides.
            const param_tensor_t *w = &m->table.t[i - 1];
            double gn = 0, wn = 0;
            for (int64_t j = 0; j < t->numel; j++) gn += (double)m->grads[t->offset + j] * m->grads[t->offset + j];
            for (int64_t j = 0; j < w->numel; j++) wn += (double)m->grads[w->offset + j] * m->grads[w->offset + j];
            EXPECT(sqrt(gn) <= 1e-5 * sqrt(wn), "%s should vanish: |g| %.3g vs |g_weight| %.3g", name, sqrt(gn),
                   sqrt(wn));
            free(ref);
            continue;
        }
        double err = rel_err(m->grads + t->offset, ref, t->numel);
        if (err > gworst) gworst = err;
        for (int64_t j = 0; j < t->numel; j++) {
            const double d = (double)m->grads[t->offset + j] - ref[j];
            all_dd += d * d, all_rr += (double)ref[j] * ref[j];
        }
        compare(name, m->grads + t->offset, ref, t->numel, ttol);
        free(ref);
    }
    const double all = sqrt(all_dd) / fmax(sqrt(all_rr), 1e-30);
    EXPECT(all <= gtol, "every parameter gradient together: relative error %.3g > %.3g", all, gtol);
    ref = read_floats(f, "grad_input", B * T * F);
    compare("grad_input", dframes, ref, B * T * F, xtol);
    free(ref);
    for (int i = 0; i < m->state_table.count; i++) {
        const param_tensor_t *t = &m->state_table.t[i];
        snprintf(name, sizeof name, "state_after/%s", t->name);
        ref = read_floats(f, name, t->numel);
        compare(name, m->state + t->offset, ref, t->numel, tol);
        free(ref);
    }
    printf(
        "%s golden: loss %.7f (torch %.7f), worst parameter-gradient error %.2e, all of them together %.2e, worst "
        "overall %.2e\n",
        label, loss, ref_loss[0], gworst, all, worst);
    free(ref_loss);
    free(input);
    free(labels);
    free(dframes);
    model_free(m);
    H5Fclose(f);
    return test_report(label);
}
