// Subcommands of the spkddp binary. Each parses its own flags and returns an exit code.
#pragma once
#include "app/dist/comm.h"

int cmd_prepare(const comm_t *comm, int argc, char **argv);
int cmd_synth(const comm_t *comm, int argc, char **argv);
int cmd_train(const comm_t *comm, int argc, char **argv);
int cmd_inspect(const comm_t *comm, int argc, char **argv);
int cmd_diff(const comm_t *comm, int argc, char **argv);
int cmd_embed(const comm_t *comm, int argc, char **argv);
int cmd_score(const comm_t *comm, int argc, char **argv);
int cmd_calibrate(const comm_t *comm, int argc, char **argv);
int cmd_trials(const comm_t *comm, int argc, char **argv);
int cmd_bench(const comm_t *comm, int argc, char **argv);
int cmd_export(const comm_t *comm, int argc, char **argv);
int cmd_average(const comm_t *comm, int argc, char **argv);
// spkddp --version: the version and every library it runs on, with theirs.
int cmd_version(const comm_t *comm, int argc, char **argv);
