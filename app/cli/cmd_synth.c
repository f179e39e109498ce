// `spkddp synth`: writes a synthetic dataset (rank 0 only when started under MPI).
#include "kernels/base/check.h"
#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "io/synth.h"

#include <stddef.h>
#include <string.h>

typedef struct {
    char out[OPT_STR_MAX];
    char val_out[OPT_STR_MAX];
    char kind[OPT_STR_MAX];
    int64_t seed, samples, dim, classes, speakers, first_speaker, utts, val_utts, min_frames, max_frames, visual_dim;
    double separation;
} synth_opts_t;

static const opt_t rows[] = {
    OPT_TEXT(synth_opts_t, out, "out", OPT_REQUIRED, "output dataset (HDF5)"),
    OPT_CHOICE(synth_opts_t, kind, "kind", "toy|speakers", "toy: the seed job's data; speakers: variable-length utterances"),
    OPT_TEXT(synth_opts_t, val_out, "val-out", OPT_OPTIONAL, "speakers: also write held-out utterances of the same speakers here"),
    OPT_SEED(synth_opts_t, seed, "random seed"),
    OPT_INTEGER(synth_opts_t, samples, "samples", 1, 1e9, "toy: samples"),
    OPT_INTEGER(synth_opts_t, dim, "dim", 1, 1024, "feature dimension (toy default 64, speakers default 80)"),
    OPT_INTEGER(synth_opts_t, classes, "classes", 2, 1e6, "toy: classes"),
    OPT_NUMBER(synth_opts_t, separation, "separation", 0, 100, "toy: class-mean shift (0 = pure noise, as the seed job)"),
    OPT_INTEGER(synth_opts_t, speakers, "speakers", 2, 1e6, "speakers: number of speakers"),
    OPT_INTEGER(synth_opts_t, first_speaker, "first-speaker", 0, 1e9, "speakers: first voice index (disjoint ranges = unseen speakers)"),
    OPT_INTEGER(synth_opts_t, utts, "utts-per-speaker", 1, 1e6, "speakers: training utterances per speaker"),
    OPT_INTEGER(synth_opts_t, val_utts, "val-utts-per-speaker", 1, 1e6, "speakers: held-out utterances per speaker"),
    OPT_INTEGER(synth_opts_t, visual_dim, "visual-dim", 0, 4096, "speakers: add a /visual stream (25 frames/s) of this dimension"),
    OPT_INTEGER(synth_opts_t, min_frames, "min-frames", 1, 1e6, "speakers: shortest utterance"),
    OPT_INTEGER(synth_opts_t, max_frames, "max-frames", 1, 1e6, "speakers: longest utterance"),
};
static const opt_table_t table = OPT_TABLE("synth", "Write a synthetic feature dataset.", rows);

int cmd_synth(const comm_t *comm, int argc, char **argv) {
    synth_config_t d = synth_defaults();
    synth_opts_t o = {.seed = (int64_t)d.seed, .samples = d.toy_samples, .dim = 0, .classes = d.toy_classes,
                      .speakers = d.speakers, .utts = d.utts_per_speaker, .val_utts = d.val_utts_per_speaker,
                      .min_frames = d.min_frames, .max_frames = d.max_frames, .separation = d.toy_separation};
    strcpy(o.kind, "toy");
    opt_parse(&table, &o, argc, argv, NULL, 0);
    if (o.min_frames > o.max_frames) spk_fail_all(SPK_EXIT_USAGE, "synth: --min-frames exceeds --max-frames");
    synth_config_t c = d;
    c.seed = (uint64_t)o.seed;
    c.toy_samples = o.samples;
    c.toy_classes = o.classes;
    c.toy_separation = o.separation;
    c.toy_dim = o.dim ? o.dim : d.toy_dim;
    c.dim = o.dim ? o.dim : d.dim;
    c.speakers = o.speakers;
    c.first_speaker = o.first_speaker;
    c.visual_dim = o.visual_dim;
    c.utts_per_speaker = o.utts;
    c.val_utts_per_speaker = o.val_utts;
    c.min_frames = o.min_frames;
    c.max_frames = o.max_frames;
    if (comm->rank == 0) {
        if (strcmp(o.kind, "toy") == 0) {
            synth_write_toy(&c, o.out);
            printf("wrote %s: %lld samples x %lld dims, %lld classes (toy)\n", o.out, (long long)c.toy_samples,
                   (long long)c.toy_dim, (long long)c.toy_classes);
        } else {
            synth_write_speakers(&c, o.out, o.val_out[0] ? o.val_out : NULL);
            printf("wrote %s: %lld speakers x %lld utterances of %lld-%lld frames x %lld dims%s%s\n", o.out,
                   (long long)c.speakers, (long long)c.utts_per_speaker, (long long)c.min_frames,
                   (long long)c.max_frames, (long long)c.dim, o.val_out[0] ? "; held-out: " : "", o.val_out);
        }
    }
    comm_barrier(comm);
    return SPK_EXIT_OK;
}
