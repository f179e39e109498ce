// `spkddp bench`: throughput of the training step (forward, backward, gradient averaging,
// optimizer update) on random data, no I/O. Under mpiexec every rank takes part and the
// figure is for the whole job.
#include "kernels/base/check.h"
#include "app/cli/commands.h"
#include "app/cli/train_options.h"
#include "app/dist/device_select.h"
#include "app/dist/grad_sync.h"
#include "app/model/model.h"
#include "app/train/optimizer.h"
#include "io/rng.h"
#include "kernels/base/clock.h"
#ifdef SPKDDP_HAVE_CUDA
#include "kernels/cuda/kernels_cuda.h"
#endif

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

typedef struct {
    char model[OPT_STR_MAX], device[OPT_STR_MAX];
    int64_t channels, batch, frames, feat, classes, steps, warmup;
    int tf32;
} bench_opts_t;

#define F(field) offsetof(bench_opts_t, field)
static const opt_t opts[] = {
    {"model", OPT_STR, F(model), 0, 0, "linear|ecapa", "model"},
    {"channels", OPT_INT, F(channels), 8, 4096, NULL, "ECAPA channels C"},
    {"batch", OPT_INT, F(batch), 1, 1e6, NULL, "per-rank batch"},
    {"frames", OPT_INT, F(frames), 8, 1e6, NULL, "frames per sample T"},
    {"feat", OPT_INT, F(feat), 1, 4096, NULL, "feature dimension F"},
    {"classes", OPT_INT, F(classes), 2, 1e7, NULL, "speakers in the AAM head"},
    {"steps", OPT_INT, F(steps), 1, 1e6, NULL, "timed steps"},
    {"warmup", OPT_INT, F(warmup), 0, 1e6, NULL, "untimed steps first"},
    {"tf32", OPT_FLAG, F(tf32), 0, 0, NULL, "CUDA: allow TF32 tensor-core math (default plain fp32)"},
    {"device", OPT_STR, F(device), 0, 0, "cpu|cuda|auto|cpu-staged", "where to run (auto: a GPU when every rank has one; default $SPKDDP_DEVICE or auto)"},
};
static const opt_table_t table = {"bench", "Time training steps (forward, backward, allreduce, Adam) on random data.", opts,
                                  (int)(sizeof opts / sizeof opts[0])};

// Forward multiply-adds of ECAPA per sample (x2 = FLOP): every conv over T frames, the
// SE and embedding layers once.
static double ecapa_forward_flop(int64_t F, int64_t C, int64_t T) {
    double c = (double)C, t = (double)T, f = 0;
    f += 2.0 * F * c * 5 * t;                              // block 0
    f += 3 * (2 * (2.0 * c * c * t) +                      // tdnn1, tdnn2
              7 * 2.0 * (c / 8) * (c / 8) * 3 * t +         // Res2Net branches
              2 * 2.0 * c * 128);                           // SE
    f += 2.0 * 3 * c * 3 * c * t;                          // MFA
    f += 2.0 * 9 * c * 128 * t + 2.0 * 128 * 3 * c * t;    // attention
    f += 2.0 * 6 * c * 192;                                // embedding
    return f;
}

int cmd_bench(const comm_t *comm, int argc, char **argv) {
    bench_opts_t o = {.channels = 512, .batch = 32, .frames = 200, .feat = 80, .classes = 1000, .steps = 5, .warmup = 2};
    strcpy(o.model, "ecapa");
    snprintf(o.device, sizeof o.device, "%s", device_default());
    opt_parse(&table, &o, argc, argv, NULL, 0);
    const spk_backend_t *be = device_select(comm, o.device, "bench");
    const int tf32 = device_set_tf32(be, o.tf32);

    train_config_t cfg = train_config_defaults();
    snprintf(cfg.model, sizeof cfg.model, "%s", o.model);
    cfg.channels = o.channels;
    cfg.frames = o.frames;
    strcpy(cfg.optimizer, "adam");
    cfg.lr = 1e-3;
    model_config_t mc = train_config_model(&cfg);
    model_t *m = model_create(&mc, &(model_data_t){.feature_dim = o.feat, .num_classes = o.classes, .source = "random data"}, be);
    if (o.batch < m->min_batch)
        spk_fail_all(SPK_EXIT_USAGE, "bench: %s needs --batch %d or more (BatchNorm over the batch)", o.model, m->min_batch);
    optimizer_t opt;
    optimizer_init(&opt, &cfg, m->table.total, be);
    grad_sync_t gs;
    grad_sync_init(&gs, comm, be, m->table.total);

    // A fixed random batch: B samples of T frames.
    const int B = (int)o.batch;
    const int64_t T = o.frames, Fd = o.feat;
    batch_t b = {.n = B, .feature_dim = Fd};
    b.frame_off = mallocCheck((size_t)(B + 1) * sizeof(int64_t));
    b.labels = mallocCheck((size_t)B * sizeof(int32_t));
    b.x = mallocCheck((size_t)(B * T * Fd) * sizeof(float));
    rng_t r = rng_init(1, RNG_PURPOSE_SYNTH, (uint64_t)comm->rank, 7);
    for (int i = 0; i <= B; i++) b.frame_off[i] = i * T;
    for (int i = 0; i < B; i++) b.labels[i] = (int32_t)rng_below(&r, (uint64_t)o.classes);
    for (int64_t i = 0; i < B * T * Fd; i++) b.x[i] = (float)rng_normal(&r);

    double t0 = 0;
    for (int64_t s = 0; s < o.warmup + o.steps; s++) {
        if (s == o.warmup) {
            be->sync();
            comm_barrier(comm);
            t0 = spk_seconds();
        }
        be->vec_zero(m->grads, (size_t)m->table.total);
        grad_sync_begin(&gs, m);
        m->ops->train_step(m, &b);
        grad_sync_finish(&gs);
        grad_sync_wait(&gs);
        step_stats_t st = {0};  // read like training does (it waits for the step)
        m->ops->read_stats(m, &st);
        optimizer_step(&opt, m->params, m->grads, 1e-3);
    }
    be->sync();
    comm_barrier(comm);
    double dt = spk_seconds() - t0;
    double sps = (double)o.steps * B * comm->size / dt;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf0("bench: %s C=%lld batch %d x %d ranks, T=%lld, F=%lld, %s%s", o.model, (long long)o.channels, B, comm->size,
            (long long)T, (long long)Fd, be->name, tf32 ? " tf32" : "");
    if (be == &spk_backend_cpu) printf0(" %d threads/rank", comm->threads);
    printf0(": %.2f samples/s", sps);
    if (strcmp(o.model, "ecapa") == 0) {
        double fwd = ecapa_forward_flop(Fd, o.channels, T);
        printf0(", forward %.3f GFLOP/sample, %.1f GFLOP/s (forward+backward = 3x forward)", fwd * 1e-9,
                3.0 * fwd * sps * 1e-9);
    }
    printf0(", %.3f s/step, peak RSS %.0f MiB (rank 0)", dt / (double)o.steps, (double)ru.ru_maxrss / 1024.0);
#ifdef SPKDDP_HAVE_CUDA
    if (be == spk_backend_cuda()) printf0(", GPU memory in use %.0f MiB", (double)spk_cuda_bytes_in_use() / (1 << 20));
#endif
    printf0("\n");
    free(b.frame_off);
    free(b.labels);
    free(b.x);
    grad_sync_free(&gs);
    optimizer_free(&opt);
    model_free(m);
    device_release(be);
    return SPK_EXIT_OK;
}
