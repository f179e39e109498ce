// `spkddp synth`: writes a synthetic dataset (rank 0 only when started under MPI).
#include "app/cli/commands.h"
#include "app/cli/common_options.h"
#include "io/dataset/synth.h"
#include "kernels/base/check.h"

#include <stddef.h>
#include <string.h>

typedef struct {
    char out[OPT_STR_MAX];
    char val_out[OPT_STR_MAX];
    char kind[OPT_STR_MAX];
    int64_t seed;      // synth_config_t's is unsigned
    int64_t dim;       // 0: the kind's default
    synth_config_t c;  // the rest, as the generator takes it
} synth_opts_t;

static const opt_t rows[] = {
    OPT_TEXT(synth_opts_t, out, "out", OPT_REQUIRED, "output dataset (HDF5)"),
    OPT_CHOICE(synth_opts_t, kind, "kind", "toy|speakers",
               "toy: the seed job's data; speakers: variable-length utterances"),
    OPT_TEXT(synth_opts_t, val_out, "val-out", OPT_OPTIONAL,
             "speakers: also write held-out utterances of the same speakers here"),
    OPT_SEED(synth_opts_t, seed, "random seed"),
    OPT_INTEGER(synth_opts_t, c.toy_samples, "samples", 1, 1e9, "toy: samples"),
    OPT_INTEGER(synth_opts_t, dim, "dim", 1, 1024, "feature dimension (toy default 64, speakers default 80)"),
    OPT_INTEGER(synth_opts_t, c.toy_classes, "classes", 2, 1e6, "toy: classes"),
    OPT_NUMBER(synth_opts_t, c.toy_separation, "separation", 0, 100,
               "toy: class-mean shift (0 = pure noise, as the seed job)"),
    OPT_INTEGER(synth_opts_t, c.speakers, "speakers", 2, 1e6, "speakers: number of speakers"),
    OPT_INTEGER(synth_opts_t, c.first_speaker, "first-speaker", 0, 1e9,
                "speakers: first voice index (disjoint ranges = unseen speakers)"),
    OPT_INTEGER(synth_opts_t, c.utts_per_speaker, "utts-per-speaker", 1, 1e6,
                "speakers: training utterances per speaker"),
    OPT_INTEGER(synth_opts_t, c.val_utts_per_speaker, "val-utts-per-speaker", 1, 1e6,
                "speakers: held-out utterances per speaker"),
    OPT_INTEGER(synth_opts_t, c.visual_dim, "visual-dim", 0, 4096,
                "speakers: add a /visual stream (25 frames/s) of this dimension"),
    OPT_INTEGER(synth_opts_t, c.min_frames, "min-frames", 1, 1e6, "speakers: shortest utterance"),
    OPT_INTEGER(synth_opts_t, c.max_frames, "max-frames", 1, 1e6, "speakers: longest utterance"),
    OPT_SWITCH(synth_opts_t, c.spectral, "spectral",
               "speakers: frames shaped like spectra (smooth along the feature axis, each voice at its own "
               "frequency scale), for encoders that convolve along frequency"),
};
static const opt_table_t table = OPT_TABLE("synth", "Write a synthetic feature dataset.", rows);

int cmd_synth(const comm_t *comm, int argc, char **argv) {
    synth_opts_t o = {.c = synth_defaults()};
    o.seed = (int64_t)o.c.seed;
    strcpy(o.kind, "toy");
    opt_parse(&table, &o, argc, argv, NULL, 0);
    synth_config_t *c = &o.c;
    if (c->min_frames > c->max_frames) spk_fail_all(SPK_EXIT_USAGE, "synth: --min-frames exceeds --max-frames");
    c->seed = (uint64_t)o.seed;
    if (o.dim) c->toy_dim = c->dim = o.dim;
    if (comm->rank == 0) {
        if (strcmp(o.kind, "toy") == 0) {
            synth_write_toy(c, o.out);
            printf("wrote %s: %lld samples x %lld dims, %lld classes (toy)\n", o.out, (long long)c->toy_samples,
                   (long long)c->toy_dim, (long long)c->toy_classes);
        } else {
            synth_write_speakers(c, o.out, o.val_out[0] ? o.val_out : NULL);
            printf("wrote %s: %lld speakers x %lld utterances of %lld-%lld frames x %lld dims%s%s\n", o.out,
                   (long long)c->speakers, (long long)c->utts_per_speaker, (long long)c->min_frames,
                   (long long)c->max_frames, (long long)c->dim, o.val_out[0] ? "; held-out: " : "", o.val_out);
        }
    }
    comm_barrier(comm);
    return SPK_EXIT_OK;
}
