// The config text `spkddp train` stores in every checkpoint is part of the checkpoint format:
// embed and --resume read old checkpoints back through the same option table. The texts below
// are what spkddp wrote for three command lines (2 ranks) before the option tables were
// rebuilt; the table must keep writing them byte for byte and read them back unchanged.
#include "app/cli/train_options.h"
#include "io/checkpoint.h"
#include "tests/test_util.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    const char *argv[48];
    const char *text;
} case_t;

static const case_t cases[] = {
    {"adamw, cosine, held-out set",
     {"--data", "sp.h5", "--val-data", "spv.h5", "--epochs", "3", "--global-batch", "8", "--optimizer", "adamw", "--lr",
      "0.01", "--weight-decay", "0.01", "--lr-schedule", "cosine", "--warmup-steps", "3", "--max-steps", "13",
      "--ckpt-every", "5", "--device", "cpu", "--ckpt-dir", "ck_sp", "--metrics", "m_sp.jsonl"},
    "data=sp.h5\n"
    "val-data=spv.h5\n"
    "val-trials=\n"
    "frames=0\n"
    "drop-last=0\n"
    "no-shuffle=0\n"
    "device=cpu\n"
    "tf32=0\n"
    "model=linear\n"
    "channels=512\n"
    "emb-dim=192\n"
    "attention-channels=128\n"
    "se-channels=128\n"
    "visual-channels=256\n"
    "margin=0.20000000000000001\n"
    "scale=30\n"
    "margin-warmup-start=0\n"
    "margin-warmup-end=0\n"
    "epochs=3\n"
    "batch=4\n"
    "global-batch=8\n"
    "optimizer=adamw\n"
    "lr=0.01\n"
    "momentum=0\n"
    "nesterov=0\n"
    "weight-decay=0.01\n"
    "lr-schedule=cosine\n"
    "warmup-steps=3\n"
    "lr-decay=1\n"
    "lr-min=0\n"
    "cycle-steps=1000\n"
    "seed=1234\n"
    "ckpt-dir=ck_sp\n"
    "ckpt-every=5\n"
    "keep=3\n"
    "metrics=m_sp.jsonl\n"
    "resume=\n"
    "max-steps=13\n"
    "progress=30\n"},
    {"ecapa, its flags, tf32",
     {"--data", "sp.h5", "--model", "ecapa", "--channels", "16", "--emb-dim", "8", "--attention-channels", "8",
      "--se-channels", "8", "--frames", "20", "--epochs", "1", "--batch", "4", "--margin", "0.1", "--scale", "20",
      "--margin-warmup-end", "1", "--optimizer", "adam", "--lr", "0.001", "--lr-schedule", "warmup-exp", "--lr-decay",
      "0.9", "--tf32", "--device", "cpu-staged", "--ckpt-dir", "ck_ecapa", "--metrics", "m_ecapa.jsonl"},
    "data=sp.h5\n"
    "val-data=\n"
    "val-trials=\n"
    "frames=20\n"
    "drop-last=0\n"
    "no-shuffle=0\n"
    "device=cpu-staged\n"
    "tf32=1\n"
    "model=ecapa\n"
    "channels=16\n"
    "emb-dim=8\n"
    "attention-channels=8\n"
    "se-channels=8\n"
    "visual-channels=256\n"
    "margin=0.10000000000000001\n"
    "scale=20\n"
    "margin-warmup-start=0\n"
    "margin-warmup-end=1\n"
    "epochs=1\n"
    "batch=4\n"
    "global-batch=8\n"
    "optimizer=adam\n"
    "lr=0.001\n"
    "momentum=0\n"
    "nesterov=0\n"
    "weight-decay=0\n"
    "lr-schedule=warmup-exp\n"
    "warmup-steps=0\n"
    "lr-decay=0.90000000000000002\n"
    "lr-min=0\n"
    "cycle-steps=1000\n"
    "seed=1234\n"
    "ckpt-dir=ck_ecapa\n"
    "ckpt-every=0\n"
    "keep=3\n"
    "metrics=m_ecapa.jsonl\n"
    "resume=\n"
    "max-steps=0\n"
    "progress=30\n"},
    {"sgd, nesterov, cyclic, switches",
     {"--data", "toy.h5", "--optimizer", "sgd", "--momentum", "0.9", "--nesterov", "--lr-schedule", "cyclic",
      "--cycle-steps", "3", "--lr-min", "0.001", "--drop-last", "--no-shuffle", "--seed", "7", "--keep", "2", "--epochs",
      "2", "--progress", "0", "--device", "cpu", "--ckpt-dir", "ck_toy_opts", "--metrics", "m_toy_opts.jsonl"},
    "data=toy.h5\n"
    "val-data=\n"
    "val-trials=\n"
    "frames=0\n"
    "drop-last=1\n"
    "no-shuffle=1\n"
    "device=cpu\n"
    "tf32=0\n"
    "model=linear\n"
    "channels=512\n"
    "emb-dim=192\n"
    "attention-channels=128\n"
    "se-channels=128\n"
    "visual-channels=256\n"
    "margin=0.20000000000000001\n"
    "scale=30\n"
    "margin-warmup-start=0\n"
    "margin-warmup-end=0\n"
    "epochs=2\n"
    "batch=16\n"
    "global-batch=32\n"
    "optimizer=sgd\n"
    "lr=0.050000000000000003\n"
    "momentum=0.90000000000000002\n"
    "nesterov=1\n"
    "weight-decay=0\n"
    "lr-schedule=cyclic\n"
    "warmup-steps=0\n"
    "lr-decay=1\n"
    "lr-min=0.001\n"
    "cycle-steps=3\n"
    "seed=7\n"
    "ckpt-dir=ck_toy_opts\n"
    "ckpt-every=0\n"
    "keep=2\n"
    "metrics=m_toy_opts.jsonl\n"
    "resume=\n"
    "max-steps=0\n"
    "progress=0\n"},
};

static char *serialize(const train_config_t *c) {
    char *text = calloc(1, CKPT_CONFIG_MAX);
    opt_serialize(&train_options, c, text, CKPT_CONFIG_MAX);
    return text;
}

int main(void) {
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const case_t *t = &cases[k];
        int argc = 0;
        while (t->argv[argc]) argc++;
        train_config_t c = train_config_defaults();
        opt_parse(&train_options, &c, argc, (char **)t->argv, NULL, 0);
        train_config_finalize(&c, 2);
        char *written = serialize(&c);
        EXPECT(strcmp(written, t->text) == 0, "%s: writes\n%s\ninstead of\n%s", t->name, written, t->text);

        train_config_t back = train_config_defaults();
        opt_deserialize(&train_options, &back, t->text);
        char *again = serialize(&back);
        EXPECT(strcmp(again, t->text) == 0, "%s: reads back as\n%s", t->name, again);
        const model_config_t m = train_config_model(&back), want = train_config_model(&c);
        EXPECT(memcmp(&m, &want, sizeof m) == 0, "%s: the model config read back differs", t->name);
        free(written);
        free(again);
    }
    return test_report("test_train_options");
}
