// The option table of `spkddp train` (and the config text stored in checkpoints).
#pragma once
#include "app/cli/options.h"
#include "app/train/train_config.h"

extern const opt_table_t train_options;
