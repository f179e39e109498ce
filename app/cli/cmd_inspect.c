// `spkddp inspect FILE`: a short summary of a dataset, a checkpoint or an embeddings file (rank 0
// prints).
#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "io/ckpt/checkpoint.h"
#include "io/common/h5util.h"
#include "io/dataset/dataset.h"
#include "io/scores/embeddings.h"
#include "kernels/base/check.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    int params;
} inspect_opts_t;

static const opt_t rows[] = {
    OPT_SWITCH(inspect_opts_t, params, "params", "checkpoints: list every parameter tensor"),
};
static const opt_table_t table =
    OPT_TABLE("inspect", "usage: spkddp inspect FILE -- summarise a dataset, checkpoint or embeddings file.", rows);

// An augmentation bank (prepare --kind noise|rir): its kind and entries per category.
static void print_bank(const dataset_t *ds, const int64_t *per_cat) {
    char kind[32];
    if (h5_attr_read_str(ds->file, "bank", kind, sizeof kind) != 0 || !per_cat) return;
    char **names = h5_read_strings(ds->file, "speakers", ds->num_speakers);
    printf("  bank          %s:", kind);
    for (int64_t c = 0; c < ds->num_speakers; c++)
        printf("%s %s (%lld)", c ? "," : "", names ? names[c] : "?", (long long)per_cat[c]);
    printf("\n");
    if (names) h5_free_strings(names, ds->num_speakers);
}

static void inspect_dataset(const comm_t *comm, const char *path) {
    dataset_t ds;
    dataset_open(&ds, path, comm->world);
    if (comm->rank == 0) {
        int64_t mn = INT64_MAX, mx = 0, total = ds.audio.offsets[ds.num_utts];
        int64_t *per_spk = calloc((size_t)ds.num_speakers, sizeof(int64_t));
        for (int64_t i = 0; i < ds.num_utts; i++) {
            int64_t f = dataset_frames(&ds, i);
            if (f < mn) mn = f;
            if (f > mx) mx = f;
            if (per_spk) per_spk[ds.labels[i]]++;
        }
        int64_t used = 0;
        for (int64_t s = 0; per_spk && s < ds.num_speakers; s++) used += per_spk[s] > 0;
        if (ds.sample_rate > 0) {
            const int64_t samples = ds.wave.offsets[ds.num_utts];
            printf("%s: spkddp audio dataset v%d\n", path, DATASET_VERSION);
            printf("  layout        waveforms: /audio [total_samples] int16 + /offsets in samples\n");
            printf("  audio         %lld samples at %lld Hz (%.2f h); fbank window %lld, hop %lld samples\n",
                   (long long)samples, (long long)ds.sample_rate, (double)samples / (double)ds.sample_rate / 3600.0,
                   (long long)ds.frame_length, (long long)ds.frame_shift);
        } else {
            printf("%s: spkddp feature dataset v%d\n", path, DATASET_VERSION);
            printf("  layout        %s\n", ds.audio.variable ? "variable length: /features [total_frames, F] + /offsets"
                                                             : "fixed length: /features [N, T, F]");
        }
        printf("  utterances    %lld\n", (long long)ds.num_utts);
        printf("  feature_dim   %lld\n", (long long)ds.feature_dim);
        printf("  speakers      %lld (%lld with utterances)\n", (long long)ds.num_speakers, (long long)used);
        printf("  frames        %lld total, %lld..%lld per utterance, mean %.1f\n", (long long)total, (long long)mn,
               (long long)mx, (double)total / (double)ds.num_utts);
        const int64_t vframes = ds.visual.dim > 0 ? ds.visual.offsets[ds.num_utts] : 0;
        if (ds.image_size > 0)
            printf(
                "  visual stream %lld JPEG frames of %lldx%lld %s (%.1f KB each on average), 1 visual frame per %lld "
                "audio frames\n",
                (long long)vframes, (long long)ds.image_size, (long long)ds.image_size,
                ds.image_channels == 1 ? "gray" : "RGB",
                (double)(ds.jpeg.offsets[ds.num_utts] - 4 * vframes) / 1e3 / (double)vframes,
                (long long)ds.visual_ratio);
        else if (ds.visual.dim > 0)
            printf("  visual stream %lld frames x %lld dims, 1 visual frame per %lld audio frames\n",
                   (long long)vframes, (long long)ds.visual.dim, (long long)ds.visual_ratio);
        else
            printf("  visual stream none\n");
        print_bank(&ds, per_spk);
        free(per_spk);
    }
    dataset_close(&ds);
}

static void inspect_checkpoint(const char *path, int list) {
    ckpt_meta_t *m = callocCheck(1, sizeof *m);
    param_table_t p = {0}, s = {0};
    int slots = 0;
    char err[1024];
    int rc = ckpt_peek(path, m, &p, &s, &slots, err, sizeof err);
    if (rc) spk_fail_all(rc, "%s", err);
    printf("%s: spkddp checkpoint v%lld\n", path, (long long)m->version);
    printf("  model         %s, %lld parameters in %d tensors, %lld state values\n", m->model, (long long)p.total,
           p.count, (long long)s.total);
    printf("  optimizer     %s (%d slots, step %lld)\n", m->optimizer, slots, (long long)m->opt_step);
    printf("  position      epoch %lld, %lld samples into it (step %lld of the epoch), global step %lld\n",
           (long long)m->epoch + 1, (long long)m->samples_in_epoch, (long long)m->step_in_epoch,
           (long long)m->global_step);
    printf("  written by    %lld ranks, seed %lld\n", (long long)m->world_size, (long long)m->seed);
    printf("  trained on    feature_dim %lld, %lld classes\n", (long long)m->feature_dim, (long long)m->num_classes);
    if (list)
        for (int i = 0; i < p.count; i++) {
            printf("  %-40s [", p.t[i].name);
            for (int d = 0; d < p.t[i].ndim; d++) printf("%s%lld", d ? ", " : "", (long long)p.t[i].shape[d]);
            printf("]\n");
        }
    param_table_free(&p);
    param_table_free(&s);
    free(m);
}

// An embeddings file (spkddp embed): its size, the model that made it and its speakers.
static void inspect_embeddings(const char *path) {
    embeddings_t e;
    char err[1024], model[64] = "";
    const int rc = embeddings_read(path, &e, err, sizeof err);
    if (rc) spk_die(rc, "%s", err);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f >= 0) h5_attr_read_str(f, "model", model, sizeof model), H5Fclose(f);
    int32_t speakers = 0;
    for (int64_t i = 0; i < e.n; i++) speakers = e.labels[i] + 1 > speakers ? e.labels[i] + 1 : speakers;
    printf("%s: spkddp embeddings\n", path);
    printf("  embeddings    %lld of dimension %lld%s%s\n", (long long)e.n, (long long)e.dim, model[0] ? ", from " : "",
           model);
    if (e.has_labels) printf("  labels        %d speakers (0..%d)\n", (int)speakers, (int)speakers - 1);
    printf("  utterances    %s ... %s\n", e.utt_ids[0], e.utt_ids[e.n - 1]);
    embeddings_free(&e);
}

int cmd_inspect(const comm_t *comm, int argc, char **argv) {
    inspect_opts_t o = {0};
    char *pos[1];
    if (opt_parse(&table, &o, argc, argv, pos, 1) != 1)
        spk_fail_all(SPK_EXIT_USAGE, "inspect: which file? usage: spkddp inspect FILE");
    const char *path = pos[0];
    char fmt[64] = "";
    enum { DATASET, CHECKPOINT, EMBEDDINGS } kind = DATASET;
    if (comm->rank == 0) {
        h5_quiet();
        if (access(path, R_OK) != 0) spk_die(SPK_EXIT_USAGE, "%s: cannot read the file", path);
        hid_t f = H5Fis_hdf5(path) > 0 ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
        if (f < 0) spk_die(SPK_EXIT_USAGE, "%s: not an HDF5 file", path);
        h5_attr_read_str(f, "spkddp_format", fmt, sizeof fmt);
        H5Fclose(f);
        kind = strcmp(fmt, CKPT_FORMAT) == 0 ? CHECKPOINT : strcmp(fmt, EMB_FORMAT) == 0 ? EMBEDDINGS : DATASET;
    }
    comm_bcast(comm, &kind, sizeof kind, MPI_BYTE, 0);
    if (kind == CHECKPOINT) {
        if (comm->rank == 0) inspect_checkpoint(path, o.params);
    } else if (kind == EMBEDDINGS) {
        if (comm->rank == 0) inspect_embeddings(path);
    } else {
        inspect_dataset(comm, path);
    }
    return SPK_EXIT_OK;
}
