// `spkddp embed`: full-length embeddings of every utterance of a dataset in inference mode,
// sharded across ranks (app/eval/embedder.h) and written in utterance order by rank 0, as an
// HDF5 embeddings file (io/scores/embeddings.h) or for other toolkits (io/scores/emb_formats.h).
#include "app/cli/commands.h"
#include "app/cli/common_options.h"
#include "app/cli/model_file.h"
#include "app/dist/device_select.h"
#include "app/eval/embedder.h"
#include "app/model/model.h"
#include "app/train/step_watchdog.h"
#include "io/common/h5util.h"
#include "io/common/out_paths.h"
#include "io/dataset/dataset.h"
#include "io/scores/emb_formats.h"
#include "io/scores/embeddings.h"
#include "kernels/base/check.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char ckpt[OPT_STR_MAX], data[OPT_STR_MAX], out[OPT_STR_MAX], format[OPT_STR_MAX], device[OPT_STR_MAX];
    char precision[8];        // of this run, whatever the training's was
    char conv_algorithm[12];  // likewise
    char modality[16];        // both | audio | visual
    int64_t batch;
} embed_opts_t;

static const opt_t rows[] = {
    OPT_TEXT(embed_opts_t, ckpt, "ckpt", OPT_REQUIRED,
             "checkpoint of a trained model (or a safetensors file from spkddp export or "
             "tools/speechbrain_to_safetensors.py)"),
    OPT_TEXT(embed_opts_t, data, "data", OPT_REQUIRED, "dataset to embed (HDF5 features)"),
    OPT_TEXT(embed_opts_t, out, "out", OPT_REQUIRED, "embeddings file to write"),
    OPT_CHOICE(embed_opts_t, format, "format", "hdf5|npy|ark",
               "hdf5: spkddp's embeddings file (score, trials); npy: NumPy (N, E) float32 + STEM_ids.txt; ark: Kaldi "
               "binary float vectors + STEM.scp"),
    OPT_BATCH(embed_opts_t, batch),
    OPT_DEVICE(embed_opts_t, device),
    OPT_PRECISION(embed_opts_t, precision),
    OPT_CONV_ALGORITHM(embed_opts_t, conv_algorithm),
    OPT_CHOICE(embed_opts_t, modality, "modality", "both|audio|visual",
               "audio-visual models: embed from both streams (default), or from one alone (a model trained with "
               "--modality-dropout)"),
};
static const opt_table_t table =
    OPT_TABLE("embed", "Embed every utterance of a dataset with a trained model (inference mode).", rows);

// NAME.ext -> NAME + tail (the companion file of an npy or ark output).
static void companion(const char *out, const char *ext, const char *tail, char *path, size_t cap) {
    size_t n = strlen(out), e = strlen(ext);
    if (n > e && strcmp(out + n - e, ext) == 0) n -= e;
    snprintf(path, cap, "%.*s%s", (int)n, out, tail);
}

static void write_embeddings(const embed_opts_t *o, const embeddings_t *e, const char *model) {
    char side[OPT_STR_MAX + 16] = "", err[1024];
    int rc = 0;
    if (strcmp(o->format, "npy") == 0) {
        companion(o->out, ".npy", "_ids.txt", side, sizeof side);
        rc = emb_write_npy(o->out, side, e, err, sizeof err);
    } else if (strcmp(o->format, "ark") == 0) {
        companion(o->out, ".ark", ".scp", side, sizeof side);
        rc = emb_write_ark(o->out, side, e, err, sizeof err);
    } else {
        embeddings_write(o->out, e, model);
    }
    if (rc) spk_die(rc, "%s", err);
    printf("wrote %s%s%s: %lld embeddings of dimension %lld (model %s from %s)\n", o->out, side[0] ? " and " : "", side,
           (long long)e->n, (long long)e->dim, model, o->ckpt);
}

int cmd_embed(const comm_t *comm, int argc, char **argv) {
    embed_opts_t o = {.batch = 16, .format = "hdf5", .precision = "fp32", .conv_algorithm = "auto", .modality = "both"};
    snprintf(o.device, sizeof o.device, "%s", device_default());
    opt_parse(&table, &o, argc, argv, NULL, 0);
    out_paths_check("embed", (const path_arg_t[]){{"--out", o.out}}, 1,
                    (const path_arg_t[]){{"--ckpt", o.ckpt}, {"--data", o.data}}, 2);
    const spk_backend_t *be = device_select(comm, o.device, "embed");
    device_set_precision(comm, be, o.precision);
    model_t *m = model_file_load(comm, o.ckpt, be, o.precision, o.conv_algorithm, NULL);
    dataset_t ds;
    dataset_open(&ds, o.data, comm->world);
    if (ds.feature_dim != m->feature_dim)
        spk_fail_all(SPK_EXIT_DATA, "%s: feature_dim %lld, but the model in %s was trained on %lld", o.data,
                     (long long)ds.feature_dim, o.ckpt, (long long)m->feature_dim);

    if (m->visual_dim > 0 && (ds.visual.dim != m->visual_dim || ds.visual_ratio != m->visual_ratio))
        spk_fail_all(SPK_EXIT_DATA,
                     "%s: the /visual stream has %lld values a frame, 1 per %lld audio frames; the model in %s was "
                     "trained on %lld, 1 per %lld",
                     o.data, (long long)ds.visual.dim, (long long)ds.visual_ratio, o.ckpt, (long long)m->visual_dim,
                     (long long)m->visual_ratio);
    if (strcmp(o.modality, "both") != 0 && m->visual_dim == 0)
        spk_fail_all(SPK_EXIT_USAGE, "embed: --modality %s applies to audio-visual models; %s is audio only",
                     o.modality, o.ckpt);
    m->embed_modality = strcmp(o.modality, "audio") == 0    ? MODALITY_AUDIO
                        : strcmp(o.modality, "visual") == 0 ? MODALITY_VISUAL
                                                            : MODALITY_BOTH;
    const int64_t N = ds.num_utts, E = m->emb_dim;
    embeddings_t out = {.n = N, .dim = E};
    step_watchdog_start(comm->wait.timeout_s);  // (the dataset's collective reads have no deadline of MPI's)
    out.emb = embed_dataset(comm, m, &ds, o.batch, step_watchdog_met);
    step_watchdog_stop();
    if (comm->rank == 0) {
        out.labels = ds.labels;
        out.utt_ids = h5_read_strings(ds.file, "utt_ids", N);
        if (!out.utt_ids) {  // datasets without names: position in the file
            out.utt_ids = callocCheck((size_t)N, sizeof(char *));
            for (int64_t i = 0; i < N; i++) {
                out.utt_ids[i] = mallocCheck(24);
                snprintf(out.utt_ids[i], 24, "utt%07lld", (long long)i);
            }
        }
        write_embeddings(&o, &out, m->name);
        h5_free_strings(out.utt_ids, N);
    }
    comm_barrier(comm);
    free(out.emb);
    dataset_close(&ds);
    model_free(m);
    device_release(be);
    return SPK_EXIT_OK;
}
