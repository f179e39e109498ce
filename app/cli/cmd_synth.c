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

#define F(field) offsetof(synth_opts_t, field)
static const opt_t opts[] = {
    {"out", OPT_STR, F(out), 0, 0, NULL, "output dataset (HDF5)"},
    {"kind", OPT_STR, F(kind), 0, 0, "toy|speakers", "toy: the seed job's data; speakers: variable-length utterances"},
    {"val-out", OPT_STR, F(val_out), 0, 0, NULL, "speakers: also write held-out utterances of the same speakers here"},
    {"seed", OPT_INT, F(seed), 0, 9e15, NULL, "random seed"},
    {"samples", OPT_INT, F(samples), 1, 1e9, NULL, "toy: samples"},
    {"dim", OPT_INT, F(dim), 1, 1024, NULL, "feature dimension (toy default 64, speakers default 80)"},
    {"classes", OPT_INT, F(classes), 2, 1e6, NULL, "toy: classes"},
    {"separation", OPT_REAL, F(separation), 0, 100, NULL, "toy: class-mean shift (0 = pure noise, as the seed job)"},
    {"speakers", OPT_INT, F(speakers), 2, 1e6, NULL, "speakers: number of speakers"},
    {"first-speaker", OPT_INT, F(first_speaker), 0, 1e9, NULL, "speakers: first voice index (disjoint ranges = unseen speakers)"},
    {"utts-per-speaker", OPT_INT, F(utts), 1, 1e6, NULL, "speakers: training utterances per speaker"},
    {"val-utts-per-speaker", OPT_INT, F(val_utts), 1, 1e6, NULL, "speakers: held-out utterances per speaker"},
    {"visual-dim", OPT_INT, F(visual_dim), 0, 4096, NULL, "speakers: add a /visual stream (25 frames/s) of this dimension"},
    {"min-frames", OPT_INT, F(min_frames), 1, 1e6, NULL, "speakers: shortest utterance"},
    {"max-frames", OPT_INT, F(max_frames), 1, 1e6, NULL, "speakers: longest utterance"},
};
static const opt_table_t table = {"synth", "Write a synthetic feature dataset.", opts, (int)(sizeof opts / sizeof opts[0])};

int cmd_synth(const comm_t *comm, int argc, char **argv) {
    synth_config_t d = synth_defaults();
    synth_opts_t o = {.seed = (int64_t)d.seed, .samples = d.toy_samples, .dim = 0, .classes = d.toy_classes,
                      .speakers = d.speakers, .utts = d.utts_per_speaker, .val_utts = d.val_utts_per_speaker,
                      .min_frames = d.min_frames, .max_frames = d.max_frames, .separation = d.toy_separation};
    strcpy(o.kind, "toy");
    opt_parse(&table, &o, argc, argv, NULL, 0);
    if (!o.out[0]) spk_fail_all(SPK_EXIT_USAGE, "synth: --out is required");
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
