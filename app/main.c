// spkddp: data-parallel training of speaker-embedding encoders under MPI.
#include "app/cli/commands.h"
#include "app/dist/comm.h"
#include "kernels/base/check.h"
#include "kernels/base/stop_signals.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int (*run)(const comm_t *, int, char **);
    const char *help;
} commands[] = {
    {"prepare", cmd_prepare, "compute log mel filterbanks of Kaldi-style lists into a dataset"},
    {"synth", cmd_synth, "write a synthetic feature dataset (toy or speakers)"},
    {"train", cmd_train, "train a model with synchronous data parallelism"},
    {"inspect", cmd_inspect, "summarise a dataset or a checkpoint"},
    {"diff", cmd_diff, "compare two checkpoints value by value"},
    {"embed", cmd_embed, "embed every utterance of a dataset with a trained model"},
    {"export", cmd_export, "write a trained model as safetensors (SpeechBrain names) or ONNX"},
    {"average", cmd_average, "average the weights of checkpoints of one model"},
    {"trials", cmd_trials, "make a verification trial list from speaker labels"},
    {"score", cmd_score, "score trials: cosine, EER, minDCF, DET, optional S-norm/AS-norm"},
    {"calibrate", cmd_calibrate, "fit or apply a calibration of scores to log-likelihood ratios (Cllr, minCllr)"},
    {"bench", cmd_bench, "time training steps on random data (samples/s, GFLOP/s)"},
};
#define NCOMMANDS (int)(sizeof commands / sizeof commands[0])

static void usage(void) {
    printf0("usage: spkddp COMMAND [options]   (spkddp COMMAND --help for its options)\n\ncommands:\n");
    for (int i = 0; i < NCOMMANDS; i++) printf0("  %-10s %s\n", commands[i].name, commands[i].help);
    printf0("\nrun under MPI: mpiexec -n 2 spkddp train --data toy.h5\n");
    printf0("spkddp --version: this spkddp's version and the libraries it runs on\n");
}

// glibc hands freed blocks above its mmap threshold (128 KiB to 32 MiB) back to the kernel, and
// trims the heap's free top likewise. The MPI library's temporary buffers of every gradient
// allreduce then come back as fresh pages each step: 2 ranks of ECAPA C=512 took 5,800 page
// faults a step and ran 2-4% slower (docs/slurm.md). Blocks up to 256 MiB now stay with the
// process and are reused; a user's own MALLOC_*_ settings win.
static void keep_freed_memory(void) {
    if (getenv("MALLOC_MMAP_THRESHOLD_") || getenv("MALLOC_TRIM_THRESHOLD_") || getenv("MALLOC_MMAP_MAX_")) return;
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

// A report that never reached stdout (a full disk, a closed file) fails the command, rather than
// ending it with 0 and nothing said.
static void check_stdout(const char *command) {
    errno = 0;
    const int flushed = fflush(stdout) == 0;
    if (!flushed || ferror(stdout))
        spk_die(SPK_EXIT_FAILURE, "%s: cannot write its output to stdout%s%s%s", command, errno ? " (" : "",
                errno ? strerror(errno) : "", errno ? ")" : "");
}

int main(int argc, char **argv) {
    keep_freed_memory();
    // Before MPI and the libraries start threads (kernels/base/stop_signals.h): training stops
    // at an agreed step with a checkpoint, every other command at once, leaving nothing behind.
    const int training = argc > 1 && strcmp(argv[1], "train") == 0;
    stop_signals_start(argc > 1 ? argv[1] : "spkddp", training ? STOP_AT_SAFE_POINT : STOP_AT_ONCE);
    comm_t comm;
    comm_init(&comm, &argc, &argv);
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage();
        spk_exit_all(argc < 2 ? SPK_EXIT_USAGE : SPK_EXIT_OK);
    }
    if (strcmp(argv[1], "--version") == 0) {
        spk_exit_all(cmd_version(&comm, argc - 2, argv + 2));
    }
    for (int i = 0; i < NCOMMANDS; i++) {
        if (strcmp(argv[1], commands[i].name) == 0) {
            int rc = commands[i].run(&comm, argc - 2, argv + 2);
            stop_signals_command_done();
            if (rc == SPK_EXIT_OK) check_stdout(argv[1]);
            spk_exit_all(rc);
        }
    }
    spk_fail_all(SPK_EXIT_USAGE, "unknown command '%s' (spkddp --help lists them)", argv[1]);
}
