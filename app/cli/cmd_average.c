// `spkddp average --out A CKPT...`: WeSpeaker's model averaging (io/ckpt/ckpt_average.h), e.g. of
// the last checkpoints of a run before embedding or exporting it.
#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "io/ckpt/ckpt_average.h"
#include "io/common/out_paths.h"
#include "kernels/base/check.h"

#include <stdio.h>
#include <stdlib.h>

#define AVERAGE_MAX_INPUTS 1000

typedef struct {
    char out[OPT_STR_MAX];
} average_opts_t;

static const opt_t rows[] = {
    OPT_TEXT(average_opts_t, out, "out", OPT_REQUIRED, "the averaged checkpoint to write (replaced if it exists)"),
};
static const opt_table_t table = OPT_TABLE("average",
                                           "usage: spkddp average --out A.h5 CKPT... -- the mean of the parameters and "
                                           "BatchNorm statistics of checkpoints of one "
                                           "model (no optimizer state: embed, export, or --init-from it).",
                                           rows);

int cmd_average(const comm_t *comm, int argc, char **argv) {
    average_opts_t o = {0};
    char **in = callocCheck(AVERAGE_MAX_INPUTS, sizeof *in);
    const int n = opt_parse(&table, &o, argc, argv, in, AVERAGE_MAX_INPUTS);
    if (n < 1) spk_fail_all(SPK_EXIT_USAGE, "average: which checkpoints? usage: spkddp average --out A.h5 CKPT...");
    path_arg_t *ins = callocCheck((size_t)n, sizeof *ins);
    for (int i = 0; i < n; i++) ins[i] = (path_arg_t){"checkpoint", in[i]};
    out_paths_check("average", (const path_arg_t[]){{"--out", o.out}}, 1, ins, n);
    free(ins);
    int rc = 0;
    if (comm->rank == 0) {
        char err[1024];
        rc = ckpt_average((const char *const *)in, n, o.out, err, sizeof err);
        if (rc) spk_die(rc, "%s", err);
        printf("wrote %s: the mean of %d checkpoint%s\n", o.out, n, n == 1 ? "" : "s");
    }
    comm_barrier(comm);
    free(in);
    return rc;
}
