// WeSpeaker's ResNets in spkddp: the encoder parameter count of every depth at WeSpeaker's
// defaults (F 80, m 32, embedding 256: ResNet34 6,634,336, as PyTorch counts it in
// tests/golden/make_resnet_golden.py), embeddings of utterances of several lengths the same
// alone as in a batch (inference uses the running statistics), a training step on the
// cpu-staged backend (the GPU path's data movement) bitwise the cpu backend's, and a bf16 step
// with each BatchNorm writing the next convolution's rounded input bitwise the step where each
// convolution rounds its own; --zero-init-residual zeroes each residual block's last BatchNorm
// weight and nothing else.
#include "app/model/campplus/campplus.h"
#include "app/model/model.h"
#include "app/model/resnet/resnet.h"
#include "kernels/base/rng.h"
#include "tests/test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t encoder_params(const char *depth) {
    model_config_t mc = model_config_defaults(depth);
    model_t *m = model_create(&mc, &(model_data_t){.feature_dim = 80, .num_classes = 10}, &spk_backend_cpu);
    int64_t n = m->table.total;
    for (int i = 0; i < m->table.count; i++)
        if (strcmp(m->table.t[i].name, "classifier.weight") == 0) n -= m->table.t[i].numel;
    EXPECT(m->emb_dim == 256, "%s: embedding %lld, want WeSpeaker's 256", depth, (long long)m->emb_dim);
    model_free(m);
    return n;
}

// A small model's config: width 4, embedding 8.
static model_config_t small_config(const char *depth) {
    model_config_t mc = model_config_defaults(depth);
    mc.channels = 4, mc.emb_dim = 8, mc.scale = 8;
    return mc;
}

static model_t *small_at(const char *depth, const spk_backend_t *be, const char *precision) {
    model_config_t mc = small_config(depth);
    snprintf(mc.precision, sizeof mc.precision, "%s", precision);
    return model_create(&mc, &(model_data_t){.feature_dim = 16, .num_classes = 5}, be);
}

static model_t *small(const char *depth, const spk_backend_t *be) { return small_at(depth, be, "fp32"); }

// A batch of n utterances whose lengths are len[i], random frames.
static batch_t batch_of(int n, const int *len, int F, rng_t *r) {
    batch_t b = {.n = n, .feature_dim = F};
    b.frame_off = calloc((size_t)n + 1, sizeof(int64_t));
    for (int i = 0; i < n; i++) b.frame_off[i + 1] = b.frame_off[i] + len[i];
    b.x = malloc((size_t)b.frame_off[n] * F * sizeof(float));
    for (int64_t i = 0; i < b.frame_off[n] * F; i++) b.x[i] = (float)rng_normal(r);
    b.labels = calloc((size_t)n, sizeof(int32_t));
    for (int i = 0; i < n; i++) b.labels[i] = i % 5;
    return b;
}

static void batch_free(batch_t *b) {
    free(b->frame_off);
    free(b->x);
    free(b->labels);
}

// Embeddings of a batch of mixed lengths, then of each utterance alone: the same values.
static void embed_lengths(const char *depth) {
    model_t *m = small(depth, &spk_backend_cpu);
    rng_t r = rng_init(3, 77, 0, 0);
    const int len[5] = {40, 40, 23, 9, 61};
    batch_t b = batch_of(5, len, 16, &r);
    const int E = (int)m->emb_dim;
    float all[5 * 8], one[8];
    m->ops->embed(m, &b, all);
    for (int i = 0; i < 5; i++) {
        batch_t s = {.n = 1, .feature_dim = 16, .frame_off = (int64_t[]){0, len[i]}, .x = b.x + b.frame_off[i] * 16};
        m->ops->embed(m, &s, one);
        double d = 0;
        for (int k = 0; k < E; k++) d = fmax(d, fabs(one[k] - all[i * E + k]));
        EXPECT(d <= 1e-5, "%s: utterance %d (%d frames) alone differs from the batch by %g", depth, i, len[i], d);
    }
    batch_free(&b);
    model_free(m);
}

// One training step of models a and s: the same gradients and running statistics (what names
// the comparison).
static void same_step(model_t *a, model_t *s, const char *depth, const char *what) {
    rng_t r = rng_init(4, 78, 0, 0);
    const int len[4] = {24, 24, 24, 24};
    batch_t b = batch_of(4, len, 16, &r);
    model_t *ms[2] = {a, s};
    for (int k = 0; k < 2; k++) {
        model_zero_grads(ms[k]);
        ms[k]->ops->train_step(ms[k], &b);
        step_stats_t st = {0};
        while (model_read_stats(ms[k], &st)) {}
        model_download(ms[k]);
    }
    float *ga = malloc((size_t)a->table.total * sizeof(float)), *gs = malloc((size_t)s->table.total * sizeof(float));
    s->be->download(gs, s->grads, (size_t)s->table.total * sizeof(float));
    memcpy(ga, a->grads, (size_t)a->table.total * sizeof(float));
    EXPECT(memcmp(ga, gs, (size_t)a->table.total * sizeof(float)) == 0, "%s: %s: the gradients differ", depth, what);
    EXPECT(memcmp(a->host_state, s->host_state, (size_t)a->state_table.total * sizeof(float)) == 0,
           "%s: %s: the running statistics differ", depth, what);
    free(ga);
    free(gs);
    batch_free(&b);
    model_free(a);
    model_free(s);
}

// cpu-staged (the GPU path's data movement) against cpu.
static void staged_step(const char *depth) {
    same_step(small(depth, &spk_backend_cpu), small(depth, &spk_backend_cpu_staged), depth, "cpu-staged");
}

// bf16 training with every BatchNorm writing the next convolution's rounded input (the units'
// chain, conv2d_bn_t.next; the outputs only the next unit reads then not written in float32)
// against the chain cut, where each convolution rounds its own input. ResNets, and CAM++, whose
// front end's last block writes the input of the unit after the blocks.
static void chained_rounding_step(const char *depth) {
    model_t *chained = small_at(depth, &spk_backend_cpu, "bf16"), *cut = small_at(depth, &spk_backend_cpu, "bf16");
    int count = 0, linked = 0;
    conv2d_bn_t *const *units;
    if (strcmp(depth, "campplus") == 0) {
        const campplus_t *c = cut->impl;
        units = c->units, count = c->nunits;
    } else {
        const resnet_t *r = cut->impl;
        units = r->units, count = r->nunits;
    }
    for (int i = 0; i < count; i++) linked += units[i]->next != NULL, units[i]->next = NULL;
    EXPECT(linked > 0, "%s: no unit writes the next one's rounded input", depth);
    same_step(chained, cut, depth, "bf16, BatchNorm writing the next convolution's input");
}

// --zero-init-residual: the same initial parameters but the weight of every residual block's
// last BatchNorm (bn2 of a BasicBlock, bn3 of a Bottleneck), which is 0; `blocks` of them. The
// -av models on pictures of 18 x 18 x 3, whose face encoder has 8 blocks more.
static void zero_residual_init(const char *depth, const char *last_bn, int blocks) {
    const int av = strstr(depth, "-av") != NULL;
    const model_data_t data = {.feature_dim = 16,
                               .num_classes = 5,
                               .visual_dim = av ? 3 * 18 * 18 : 0,
                               .visual_ratio = av ? 4 : 0,
                               .visual_kind = av ? VISUAL_PICTURES : 0};
    model_config_t mc = small_config(depth);
    mc.face_channels = av ? 4 : 0;
    model_t *plain = model_create(&mc, &data, &spk_backend_cpu);
    mc.zero_init_residual = 1;
    model_t *zero = model_create(&mc, &data, &spk_backend_cpu);
    EXPECT(zero->residual_zeroed, "%s: no residual block was zeroed", depth);
    int zeroed = 0;
    for (int i = 0; i < plain->table.count; i++) {
        const param_tensor_t *t = &plain->table.t[i];
        const float *a = plain->host_params + t->offset, *z = zero->host_params + t->offset;
        const char *dot = strstr(t->name, last_bn);
        const int is_last = dot && strcmp(dot, last_bn) == 0 && strstr(t->name, "layer") != NULL;
        int64_t off = 0, nonzero = 0;
        for (int64_t j = 0; j < t->numel; j++) off += a[j] != z[j], nonzero += z[j] != 0.0f;
        if (is_last) {
            zeroed++;
            EXPECT(nonzero == 0, "%s: %s keeps %lld nonzero values", depth, t->name, (long long)nonzero);
        } else {
            EXPECT(off == 0, "%s: %s differs from the default initialisation in %lld values", depth, t->name,
                   (long long)off);
        }
    }
    EXPECT(zeroed == blocks, "%s: %d BatchNorm weights zeroed, want one for each of %d blocks", depth, zeroed, blocks);
    model_free(plain);
    model_free(zero);
}

int main(void) {
    // WeSpeaker's depths at its defaults (PyTorch's counts, tests/golden/make_resnet_golden.py)
    const char *depth[7] = {"resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnet221", "resnet293"};
    const int64_t want[7] = {4105440, 6634336, 11131360, 15892448, 19814880, 23792224, 28626016};
    for (int i = 0; i < 7; i++) {
        const int64_t n = encoder_params(depth[i]);
        EXPECT(n == want[i], "%s encoder has %lld parameters, want %lld", depth[i], (long long)n, (long long)want[i]);
        printf("%s: %lld encoder parameters\n", depth[i], (long long)n);
    }
    embed_lengths("resnet34");
    embed_lengths("resnet50");
    staged_step("resnet34");
    staged_step("resnet50");
    chained_rounding_step("resnet34");
    chained_rounding_step("resnet50");
    chained_rounding_step("campplus");
    zero_residual_init("resnet34", ".bn2.weight", 16);
    zero_residual_init("resnet50", ".bn3.weight", 16);
    zero_residual_init("campplus", ".bn2.weight", 4);
    zero_residual_init("resnet34-av", ".bn2.weight", 16 + 8);
    zero_residual_init("campplus-av", ".bn2.weight", 4 + 8);
    return test_report("test_resnet_model");
}
