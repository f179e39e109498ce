// CAM++'s dense block and transition (app/model/campplus/campplus_dense.h) against 3D-Speaker's
// own CAMDenseTDNNBlock and TransitLayer (tests/golden/campplus_dense_golden.h5, float64, inputs
// clear of every ReLU's kink, two CAM segments): the eval forward, the training forward, every
// parameter gradient, the input gradient and the running statistics after the step, each within
// a normwise relative error of 1e-4 (the CAM masks' bias gradients are sums over B x S = 8
// segments that nearly cancel: PyTorch's own float32 step is 4.9e-5 from float64 there; 0.1%
// anywhere in the mask's backward fails by tenfold). Then the same step with the layers' inputs recomputed in the
// backward gives the same bits, and so does the step on one thread, except for the 1x1
// convolutions' weight gradients: GEMMs whose sums over the rows the threads split (kernels/conv2d.h's
// pointwise path), held to 1e-6 of each other.
#include "app/model/campplus/campplus_dense.h"
#include "tests/model/golden_util.h"

#include <omp.h>

#define TOL 1e-4

typedef struct {
    float *out, *gin, *grads, *state;
} step_t;

// One training step (forward, backward from g_out) of block k in m; the results copied out.
static step_t train_step(model_t *m, dense_block_t *k, int recompute, const float *in, const float *g_out,
                         const float *state0) {
    dense_scratch_t s = {0};
    memcpy(m->state, state0, (size_t)m->state_table.total * sizeof(float));
    memset(m->grads, 0, (size_t)m->table.total * sizeof(float));
    const size_t work_n = dense_block_reserve(k, m, k->B, k->T, recompute);
    dense_scratch_reserve(&s, m, k);
    float *work = model_buf(m, work_n + 1);
    const size_t R = (size_t)k->B * k->T;
    float *gin = model_buf(m, R * k->c0);
    dense_block_forward(k, m, in, 1, &s, work);
    dense_block_backward(k, m, g_out, gin, &s, work);
    step_t r = {malloc(R * (k->cmax / 2) * sizeof(float)), gin, malloc((size_t)m->table.total * sizeof(float)),
                malloc((size_t)m->state_table.total * sizeof(float))};
    memcpy(r.out, k->out, R * (k->cmax / 2) * sizeof(float));
    memcpy(r.grads, m->grads, (size_t)m->table.total * sizeof(float));
    memcpy(r.state, m->state, (size_t)m->state_table.total * sizeof(float));
    model_buf_free(m, &work);
    dense_scratch_release(&s, m);
    return r;
}

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

// The parameter gradients of a and b the same bits, but for the 1x1 convolutions' weights
// (linear1 and the transition's linear) when `split` (their GEMMs' sums split by thread): within
// 1e-6 of each other, normwise.
static int same_gradients(const model_t *m, const float *a, const float *b, int split) {
    for (int i = 0; i < m->table.count; i++) {
        const param_tensor_t *t = &m->table.t[i];
        const float *x = a + t->offset, *y = b + t->offset;
        const size_t n = (size_t)t->numel;
        const int pointwise =
            !strstr(t->name, "cam_layer") && (strstr(t->name, ".linear1.weight") || strstr(t->name, ".linear.weight"));
        if (!(split && pointwise)) {
            if (!same_bits(x, y, n)) return 0;
            continue;
        }
        double d = 0, r = 0;
        for (size_t j = 0; j < n; j++) d += ((double)x[j] - y[j]) * ((double)x[j] - y[j]), r += (double)x[j] * x[j];
        if (d > 1e-12 * r) return 0;
    }
    return 1;
}

static void step_free(model_t *m, step_t *r) {
    free(r->out);
    free(r->grads);
    free(r->state);
    model_buf_free(m, &r->gin);
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "campplus_dense_golden.h5";
    h5_quiet();
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) {
        fprintf(stderr, "cannot open %s\n", path);
        return 1;
    }
    int64_t B, C0, T, layers, growth, bn_size, dilation;
    h5_attr_read_i64(f, "B", &B);
    h5_attr_read_i64(f, "C0", &C0);
    h5_attr_read_i64(f, "T", &T);
    h5_attr_read_i64(f, "layers", &layers);
    h5_attr_read_i64(f, "growth_rate", &growth);
    h5_attr_read_i64(f, "bn_size", &bn_size);
    h5_attr_read_i64(f, "dilation", &dilation);

    model_t m = {.be = &spk_backend_cpu};
    dense_block_t k;
    dense_block_register(&k, &m, 1, (int)C0, (int)layers, (int)growth, (int)bn_size, (int)dilation);
    model_alloc_buffers(&m, &(model_data_t){.feature_dim = 1, .num_classes = 1});
    load_table(f, "params", &m.table, m.params);
    load_table(f, "state", &m.state_table, m.state);
    float *state0 = malloc((size_t)m.state_table.total * sizeof(float));
    memcpy(state0, m.state, (size_t)m.state_table.total * sizeof(float));
    const size_t R = (size_t)(B * T), out_n = R * (size_t)(k.cmax / 2);
    float *in = read_floats(f, "input", (int64_t)R * C0), *g_out = read_floats(f, "g_out", (int64_t)out_n);

    // eval: each reader's running statistics
    dense_scratch_t s = {0};
    float *work = model_buf(&m, dense_block_reserve(&k, &m, (int)B, (int)T, 0) + 1);
    dense_scratch_reserve(&s, &m, &k);
    dense_block_forward(&k, &m, in, 0, &s, work);
    float *ref = read_floats(f, "out_eval", (int64_t)out_n);
    compare("out_eval", k.out, ref, (int64_t)out_n, TOL);
    free(ref);
    model_buf_free(&m, &work);
    dense_scratch_release(&s, &m);

    step_t a = train_step(&m, &k, 0, in, g_out, state0);
    ref = read_floats(f, "out", (int64_t)out_n);
    compare("out", a.out, ref, (int64_t)out_n, TOL);
    free(ref);
    char name[256];
    for (int i = 0; i < m.table.count; i++) {
        const param_tensor_t *t = &m.table.t[i];
        snprintf(name, sizeof name, "grads/%s", t->name);
        ref = read_floats(f, name, t->numel);
        compare(name, a.grads + t->offset, ref, t->numel, TOL);
        free(ref);
    }
    ref = read_floats(f, "grad_input", (int64_t)R * C0);
    compare("grad_input", a.gin, ref, (int64_t)R * C0, TOL);
    free(ref);
    for (int i = 0; i < m.state_table.count; i++) {
        const param_tensor_t *t = &m.state_table.t[i];
        snprintf(name, sizeof name, "state_after/%s", t->name);
        ref = read_floats(f, name, t->numel);
        compare(name, a.state + t->offset, ref, t->numel, TOL);
        free(ref);
    }

    // recomputed inputs, and one thread: the same bits
    for (int variant = 0; variant < 2; variant++) {
        const int threads = omp_get_max_threads();
        if (variant == 1) omp_set_num_threads(1);
        step_t b = train_step(&m, &k, variant == 0, in, g_out, state0);
        omp_set_num_threads(threads);
        const char *what = variant == 0 ? "recompute" : "one thread";
        EXPECT(same_bits(a.out, b.out, out_n), "%s: the output differs", what);
        EXPECT(same_bits(a.gin, b.gin, R * C0), "%s: the input gradient differs", what);
        EXPECT(same_gradients(&m, a.grads, b.grads, variant == 1), "%s: the gradients differ", what);
        EXPECT(same_bits(a.state, b.state, (size_t)m.state_table.total), "%s: the running statistics differ", what);
        step_free(&m, &b);
    }
    printf("test_campplus_dense: %lld layers of growth %lld, %lld x %lld rows, worst relative error %.2e\n",
           (long long)layers, (long long)growth, (long long)B, (long long)T, worst);
    step_free(&m, &a);
    dense_block_release(&k, &m);
    free(k.layer);
    free(in);
    free(g_out);
    free(state0);
    model_free_buffers(&m);
    H5Fclose(f);
    return test_report("test_campplus_dense");
}
