// `spkddp bench`: throughput of the training step (forward, backward, gradient averaging,
// optimizer update) on random data, no I/O. Under mpiexec every rank takes part and the
// figure is for the whole job.
#include "app/cli/commands.h"
#include "app/cli/common_options.h"
#include "app/dist/device_select.h"
#include "app/dist/grad_sync.h"
#include "app/dist/head_comm.h"
#include "app/model/model.h"
#include "app/model/registry.h"
#include "app/train/optimizer.h"
#include "app/train/sharded_head.h"
#include "kernels/aam_shard.h"
#include "kernels/base/check.h"
#include "kernels/base/clock.h"
#include "kernels/base/rng.h"
#include "kernels/device.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

typedef struct {
    model_config_t model;  // --model, --channels, --frames (T), --precision
    char device[OPT_STR_MAX];
    int64_t batch, feat, classes, steps, warmup;
    int tf32;
    char head[OPT_STR_MAX];       // replicated | sharded
    char negatives[OPT_STR_MAX];  // global | local
} bench_opts_t;

static const opt_t rows[] = {
    OPT_MODEL_AUDIO(bench_opts_t, model.name, "model"),
    OPT_CHANNELS(bench_opts_t, model.channels),
    OPT_BATCH(bench_opts_t, batch),
    OPT_INTEGER(bench_opts_t, model.frames, "frames", 8, 1e6, "frames per sample T"),
    OPT_INTEGER(bench_opts_t, feat, "feat", 1, 4096, "feature dimension F"),
    OPT_INTEGER(bench_opts_t, classes, "classes", 2, 1e7, "speakers in the AAM head"),
    OPT_INTEGER(bench_opts_t, steps, "steps", 1, 1e6, "timed steps"),
    OPT_INTEGER(bench_opts_t, warmup, "warmup", 0, 1e6, "untimed steps first"),
    OPT_PRECISION(bench_opts_t, model.precision),
    OPT_TF32(bench_opts_t, tf32),
    OPT_DEVICE(bench_opts_t, device),
    OPT_INVARIANT(bench_opts_t, model.invariant),
    OPT_CHOICE(bench_opts_t, head, "head", "replicated|sharded",
               "the classifier whole on every rank, or its classes split across the ranks"),
    OPT_NUMBER(bench_opts_t, model.head_sample, "head-sample", 0, 1,
               "--head sharded: the fraction of the other classes each step scores (Partial FC)"),
    OPT_INVARIANT_GROUP(bench_opts_t, model.invariant_group),
    OPT_INVARIANT_BN(bench_opts_t, model.invariant_bn),
    OPT_INTEGER(bench_opts_t, model.growth_rate, "growth-rate", 1, 1024, "campplus: growth rate (default 32)"),
    OPT_INTEGER(bench_opts_t, model.bn_size, "bn-size", 1, 64, "campplus: bottleneck in growth-rate widths (4)"),
    OPT_SWITCH(bench_opts_t, model.recompute, "recompute", "campplus: recompute the dense layers' inputs"),
    OPT_CONV_ALGORITHM(bench_opts_t, model.conv_algorithm),
    OPT_CHOICE(bench_opts_t, model.loss, "loss", "aam|supcon|angleproto|ge2e|aam+supcon|aam+angleproto|aam+ge2e",
               "the training loss (the batch's labels come in groups of --utts-per-speaker)"),
    OPT_CHOICE(bench_opts_t, negatives, "negatives", "global|local", "the contrastive batch: global or each rank's"),
    OPT_INTEGER(bench_opts_t, model.per_speaker, "utts-per-speaker", 2, 1024,
                "utterances per speaker group in the batch (default 2)"),
};
static const opt_table_t table =
    OPT_TABLE("bench", "Time training steps (forward, backward, allreduce, Adam) on random data.", rows);

// A fixed random batch of B samples of T frames x F features, drawn per rank.
// Labels in groups of M (M > 0: a speaker-balanced batch for the contrastive losses).
static batch_t random_batch(const comm_t *comm, int B, int64_t T, int64_t F, int64_t classes, int64_t M) {
    batch_t b = {.n = B, .feature_dim = F};
    b.frame_off = mallocCheck((size_t)(B + 1) * sizeof(int64_t));
    b.labels = mallocCheck((size_t)B * sizeof(int32_t));
    b.x = mallocCheck((size_t)(B * T * F) * sizeof(float));
    rng_t r = rng_init(1, RNG_PURPOSE_SYNTH, (uint64_t)comm->rank, 7);
    for (int i = 0; i <= B; i++) b.frame_off[i] = i * T;
    for (int i = 0; i < B; i++)
        b.labels[i] =
            M > 0 ? (int32_t)(((int64_t)comm->rank * B + i) / M % classes) : (int32_t)rng_below(&r, (uint64_t)classes);
    for (int64_t i = 0; i < B * T * F; i++) b.x[i] = (float)rng_normal(&r);
    return b;
}

// The CPU seconds this process has used, all its threads together.
static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Under `perf record --control fifo:CTL -D -1` with SPKDDP_PERF_CTL=CTL (tools/profile_step.sh):
// perf samples the timed steps only.
static void perf_window(int on) {
    const char *ctl = getenv("SPKDDP_PERF_CTL");
    if (!ctl || !ctl[0]) return;
    FILE *f = fopen(ctl, "w");
    if (!f) spk_die(SPK_EXIT_USAGE, "SPKDDP_PERF_CTL=%s: cannot open perf's control fifo", ctl);
    const int ok = fputs(on ? "enable\n" : "disable\n", f) >= 0;
    if (fclose(f) != 0 || !ok)
        spk_die(SPK_EXIT_FAILURE, "SPKDDP_PERF_CTL=%s: cannot write to perf's control fifo", ctl);
}

// Seconds of `steps` training steps (forward, backward, averaging, Adam) on every rank,
// after `warmup` untimed ones; *cpu: the CPU seconds rank 0 used meanwhile (on a machine
// shared with other jobs, CPU time per step moves far less than wall time); *bytes: the bytes
// rank 0 sent per timed step (the gradients' collectives as bandwidth-optimal algorithms move
// them, comm_allreduce_bytes: an allreduce 2 (R - 1) / R of its payload, its payload on 2 ranks).
static double time_steps(const comm_t *comm, const spk_backend_t *be, model_t *m, head_comm_impl_t *hc,
                         const batch_t *b, int64_t warmup, int64_t steps, double *cpu, double *bytes) {
    optimizer_t opt;
    optimizer_init(&opt, &(optimizer_config_t){.kind = OPTIM_ADAM}, m->table.total, be);
    grad_sync_t gs;
    // a slice of a sharded head, or a classifier the loss does not use (as the trainer)
    const int64_t own = sharded_head_of(m) ? m->table.t[0].numel : model_unaveraged_head(m);
    grad_sync_init(&gs, comm, be, m->table.total, own, m->invariant, m->teacher);
    head_comm_use_backend(hc, be, gs.nccl);  // (the global batch's collectives as in training)
    double t0 = 0;
    for (int64_t s = 0; s < warmup + steps; s++) {
        if (s == warmup) {
            be->sync();
            comm_barrier(comm);
            if (be == spk_backend_cuda())
                spk_device_profile(1);  // a profiler (ncu --profile-from-start off) sees the timed steps only
            perf_window(1);
            t0 = spk_seconds();
            *cpu = cpu_seconds();
            grad_sync_take_bytes(&gs);
            head_comm_take_bytes(hc);
        }
        model_plan_update(m, (int64_t)b->n * comm->size, comm->size);
        model_zero_grads(m);
        m->step_key = s;
        m->batch_offset = (int64_t)comm->rank * b->n;  // (the invariant mode's contiguous slices)
        grad_sync_begin(&gs, m);
        m->ops->train_step(m, b);
        grad_sync_finish(&gs);
        grad_sync_wait(&gs);
        optimizer_step(&opt, m->params, m->grads, 1e-3);
        step_stats_t st = {0};  // read like training does: the step before's, one step late
        if (m->stats_pending > 1) model_read_stats(m, &st);
    }
    grad_sync_drain(&gs);
    step_stats_t st = {0};
    while (model_read_stats(m, &st)) {}
    be->sync();
    if (be == spk_backend_cuda()) spk_device_profile(0);
    perf_window(0);
    comm_barrier(comm);
    const double dt = spk_seconds() - t0;
    *cpu = cpu_seconds() - *cpu;
    *bytes = (double)(grad_sync_take_bytes(&gs) + head_comm_take_bytes(hc)) / (double)steps;
    head_comm_release(hc);
    grad_sync_free(&gs);
    optimizer_free(&opt);
    return dt;
}

static void report(const comm_t *comm, const bench_opts_t *o, const spk_backend_t *be, double dt, double cpu,
                   double bytes) {
    if (strcmp(o->head, "sharded") == 0)
        printf0("bench: classifier of %lld classes sharded over %d ranks\n", (long long)o->classes, comm->size);
    const double sps = (double)o->steps * (double)o->batch * comm->size / dt;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const model_config_t resolved = model_config_resolve(&o->model), *mc = &resolved;
    printf0("bench: %s C=%lld batch %d x %d ranks, T=%lld, F=%lld, %s %s%s", mc->name, (long long)mc->channels,
            (int)o->batch, comm->size, (long long)mc->frames, (long long)o->feat, be->name, mc->precision,
            !mc->invariant                           ? ""
            : strcmp(mc->invariant_bn, "group") == 0 ? " invariant, BatchNorm by groups"
                                                     : " invariant");
    if (be == &spk_backend_cpu) printf0(" %d threads/rank", comm->threads);
    if (strcmp(mc->loss, "aam") != 0)
        printf0(", loss %s (%s negatives, groups of %lld)", mc->loss, o->negatives, (long long)mc->per_speaker);
    printf0(": %.2f samples/s", sps);
    const model_family_t *family = model_family_find(mc->name);
    if (family && family->forward_flop) {
        double fwd = family->forward_flop(mc, o->feat);
        printf0(", forward %.3f GFLOP/sample, %.1f GFLOP/s (forward+backward = 3x forward)", fwd * 1e-9,
                3.0 * fwd * sps * 1e-9);
    }
    printf0(", %.3f s/step, rank 0 CPU %.3f s/step, peak RSS %.0f MiB (rank 0)", dt / (double)o->steps,
            cpu / (double)o->steps, (double)ru.ru_maxrss / 1024.0);
    double rss = (double)ru.ru_maxrss;
    comm_allreduce_max_f64(comm, &rss, 1);  // (collective: every rank reaches it)
    if (comm->size > 1) printf0(", largest rank %.0f MiB", rss / 1024.0);
    if (comm->size > 1) printf0(", %.2f MB sent per rank and step", bytes * 1e-6);
#ifdef SPKDDP_HAVE_CUDA
    if (be == spk_backend_cuda()) printf0(", GPU memory in use %.0f MiB", (double)spk_cuda_bytes_in_use() / (1 << 20));
#endif
    printf0("\n");
}

int cmd_bench(const comm_t *comm, int argc, char **argv) {
    bench_opts_t o = {
        .model = model_config_defaults("ecapa"), .batch = 32, .feat = 80, .classes = 1000, .steps = 5, .warmup = 2};
    o.model.frames = 200;
    snprintf(o.head, sizeof o.head, "replicated");
    snprintf(o.negatives, sizeof o.negatives, "global");
    snprintf(o.device, sizeof o.device, "%s", device_default());
    opt_parse(&table, &o, argc, argv, NULL, 0);
    o.model.local_negatives = strcmp(o.negatives, "local") == 0;
    if (model_config_apply_tf32(&o.model, o.tf32) != 0)
        spk_fail_all(SPK_EXIT_USAGE, "bench: --tf32 means --precision tf32, which contradicts --precision bf16");
    const spk_backend_t *be = device_select(comm, o.device, "bench");
    device_set_precision(comm, be, o.model.precision);

    const int sharded = strcmp(o.head, "sharded") == 0;
    if (o.model.head_sample > 0 && o.model.head_sample < 1 && !sharded)
        spk_fail_all(SPK_EXIT_USAGE,
                     "bench: --head-sample samples the classes of a sharded classifier: it needs --head sharded");
    if (sharded && (strcmp(o.model.name, "linear") == 0 || aam_shard_blocks(o.classes) < comm->size))
        spk_fail_all(SPK_EXIT_USAGE,
                     "bench: --head sharded needs an AAM-softmax model and at least one class (block) per rank");
    int64_t first = 0, rows = 0;
    if (sharded && comm->size > 1) head_shard_slice(o.classes, comm->size, comm->rank, &first, &rows);
    model_t *m = model_create(&o.model,
                              &(model_data_t){.feature_dim = o.feat,
                                              .num_classes = o.classes,
                                              .class_first = first,
                                              .class_rows = rows,
                                              .source = NULL,  // (no file: messages name --feat)
                                              .param_copies = 4,
                                              .ranks_per_node = comm->local_size},
                              be);
    head_comm_impl_t hc;
    head_comm_init(&hc, comm);
    if (sharded) m->head_comm = &hc.ops;
    m->batch_comm = &hc.ops;
    if (o.batch < m->min_batch)
        spk_fail_all(SPK_EXIT_USAGE, "bench: %s needs --batch %d or more (BatchNorm over the batch)", m->name,
                     m->min_batch);
    if (m->invariant && o.batch % m->group != 0)
        spk_fail_all(SPK_EXIT_USAGE, "bench: --invariant-group %d does not divide --batch %lld", m->group,
                     (long long)o.batch);
    const int contrastive = strcmp(o.model.loss, "aam") != 0;
    if (contrastive && (o.batch % o.model.per_speaker != 0 || strcmp(o.model.name, "linear") == 0 ||
                        (sharded && !strstr(o.model.loss, "aam"))))
        spk_fail_all(SPK_EXIT_USAGE,
                     "bench: --loss %s needs an encoder (not linear) and --utts-per-speaker dividing --batch",
                     o.model.loss);
    batch_t b =
        random_batch(comm, (int)o.batch, o.model.frames, o.feat, o.classes, contrastive ? o.model.per_speaker : 0);
    double cpu = 0, bytes = 0;
    const double dt = time_steps(comm, be, m, &hc, &b, o.warmup, o.steps, &cpu, &bytes);
    report(comm, &o, be, dt, cpu, bytes);
#ifdef SPKDDP_HAVE_CUDA
    if (be == spk_backend_cuda() && comm->rank == 0) {
        printf("cuDNN's choices (rank 0):\n");
        spk_cuda_print_conv_plans();
    }
#endif
    free(b.frame_off);
    free(b.labels);
    free(b.x);
    model_free(m);
    device_release(be);
    return SPK_EXIT_OK;
}
