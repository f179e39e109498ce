// The config text `spkddp train` stores in every checkpoint is part of the checkpoint format:
// embed and --resume read old checkpoints back through the same option table. The golden file
// holds what spkddp wrote for three command lines before the option tables were rebuilt; the
// table must keep writing it byte for byte, followed only by the rows appended since (with the
// values those command lines give them), and read it back unchanged.
// Usage: test_train_options tests/cli/train_config_golden.txt
#include "app/cli/train_options.h"
#include "io/checkpoint.h"
#include "tests/test_util.h"

#include <stdlib.h>
#include <string.h>

static char *serialize(const train_config_t *c) {
    char *text = calloc(1, CKPT_CONFIG_MAX);
    opt_serialize(&train_options, c, text, CKPT_CONFIG_MAX);
    return text;
}

// Rows appended to the table after the golden file was written, with the value each of its
// command lines gives them (its older --tf32 switch is stored in the tf32 row; the precision row
// keeps the --precision flag, fp32 by default).
static const char *const appended_rows[] = {"precision=fp32\n"};

static int only_appended_rows(const char *tail) {
    for (size_t i = 0; i < sizeof appended_rows / sizeof appended_rows[0]; i++) {
        const size_t n = strlen(appended_rows[i]);
        if (strncmp(tail, appended_rows[i], n) != 0) return 0;
        tail += n;
    }
    return *tail == 0;
}

// One block of the golden file: the flags (split in place) and the text they must give.
static void check(char *flags, const char *want) {
    char *argv[64];
    int argc = 0;
    for (char *a = strtok(flags, " "); a && argc < 64; a = strtok(NULL, " ")) argv[argc++] = a;
    train_config_t c = train_config_defaults();
    opt_parse(&train_options, &c, argc, argv, NULL, 0);
    train_config_finalize(&c, 2);
    char *written = serialize(&c);
    const size_t n = strlen(want);
    EXPECT(strncmp(written, want, n) == 0 && only_appended_rows(written + n), "%s: writes\n%s\ninstead of\n%s",
           argv[1], written, want);

    train_config_t back = train_config_defaults();
    opt_deserialize(&train_options, &back, want);
    char *again = serialize(&back);
    EXPECT(strncmp(again, want, n) == 0 && only_appended_rows(again + n), "%s: reads back as\n%s", argv[1], again);
    const model_config_t m = train_config_model(&back), m_want = train_config_model(&c);
    EXPECT(memcmp(&m, &m_want, sizeof m) == 0, "%s: the model config read back differs", argv[1]);
    free(written);
    free(again);
}

int main(int argc, char **argv) {
    FILE *f = argc > 1 ? fopen(argv[1], "r") : NULL;
    if (!f) {
        fprintf(stderr, "usage: test_train_options GOLDEN.txt\n");
        return 2;
    }
    char line[1024], flags[1024] = "", *text = calloc(1, CKPT_CONFIG_MAX);
    int blocks = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        if (strncmp(line, "$ ", 2) == 0) {
            snprintf(flags, sizeof flags, "%s", line + 2);
            flags[strcspn(flags, "\n")] = 0;
            text[0] = 0;
        } else if (line[0] == '\n' && flags[0]) {
            check(flags, text);
            flags[0] = 0;
            blocks++;
        } else {
            strncat(text, line, CKPT_CONFIG_MAX - strlen(text) - 1);
        }
    }
    fclose(f);
    free(text);
    EXPECT(blocks == 3, "%d blocks in %s, expected 3", blocks, argv[1]);
    return test_report("test_train_options");
}
