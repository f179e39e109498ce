// `spkddp train`: parse the flags (and --config), check them against the world size, run the trainer.
#include "app/cli/commands.h"
#include "app/cli/train_options.h"
#include "app/train/trainer.h"
#include "io/ckpt/checkpoint.h"
#include "kernels/base/check.h"

#include <stdlib.h>

int cmd_train(const comm_t *comm, int argc, char **argv) {
    train_config_t cfg = train_config_defaults();
    opt_parse(&train_options, &cfg, argc, argv, NULL, 0);
    train_config_finalize(&cfg, comm->size);
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
