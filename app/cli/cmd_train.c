// `spkddp train`: parse the flags (and --config), check them against the world size, run the trainer.
#include "app/cli/commands.h"
#include "app/cli/train_options.h"
#include "app/train/trainer.h"
#include "io/ckpt/checkpoint.h"
#include "io/common/metrics.h"
#include "kernels/base/check.h"

#include <stdlib.h>

// A fresh run rewrites its logs keeping JSON lines only, so anything else there is refused. Rank
// 0 reads them (a step log can be long) and every rank acts on what it found.
static void check_logs(const comm_t *comm, const train_config_t *c) {
    const char *flag[2] = {"--metrics", "--step-log"}, *path[2] = {c->metrics, c->step_log};
    int64_t line[2] = {0, 0};
    for (int i = 0; i < 2 && comm->rank == 0; i++) line[i] = path[i][0] ? metrics_file_foreign(path[i]) : 0;
    comm_bcast(comm, line, 2, MPI_INT64_T, 0);
    for (int i = 0; i < 2; i++)
        if (line[i])
            spk_fail_all(SPK_EXIT_USAGE,
                         "train: %s %s exists and is not a file of JSON lines (line %lld): choose another path",
                         flag[i], path[i], (long long)line[i]);
}

int cmd_train(const comm_t *comm, int argc, char **argv) {
    train_config_t cfg = train_config_defaults();
    opt_parse(&train_options, &cfg, argc, argv, NULL, 0);
    train_config_finalize(&cfg, comm->size);
    check_logs(comm, &cfg);
    char *text = callocCheck(1, CKPT_CONFIG_MAX);
    opt_serialize(&train_options, &cfg, text, CKPT_CONFIG_MAX);
    char *yaml = opt_yaml(&train_options, &cfg,
                          "spkddp train: the effective configuration of the run writing this directory (flags\n"
                          "and --config merged). Rerun or continue it with: spkddp train --config config.yaml");
    int rc = trainer_run(comm, &cfg, text, yaml);
    free(yaml);
    free(text);
    return rc;
}
