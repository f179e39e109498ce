// `spkddp train`: parse the flags, run the trainer.
#include "app/commands.h"
#include "app/config.h"
#include "app/trainer.h"

int cmd_train(const comm_t *comm, int argc, char **argv) {
    train_config_t cfg = train_config_defaults();
    opt_parse(&train_options, &cfg, argc, argv, NULL, 0);
    return trainer_run(comm, &cfg);
}
