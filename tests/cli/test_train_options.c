// The config text `spkddp train` stores in every checkpoint is part of the checkpoint format:
// embed and --resume read old checkpoints back through the same option table. The golden file
// holds what spkddp wrote for three command lines before the option tables were rebuilt; the
// table must keep writing it byte for byte, followed only by the rows appended since (at their
// defaults, which these command lines do not change), and an old text must read back to
// exactly that.
// Usage: test_train_options tests/cli/train_config_golden.txt
#include "app/cli/train_options.h"
#include "io/ckpt/checkpoint.h"
#include "tests/test_util.h"

#include <stdlib.h>
#include <string.h>

static char *serialize(const train_config_t *c) {
    char *text = calloc(1, CKPT_CONFIG_MAX);
    opt_serialize(&train_options, c, text, CKPT_CONFIG_MAX);
    return text;
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
    const size_t len = strlen(want);
    EXPECT(strncmp(written, want, len) == 0, "%s: writes\n%s\ninstead of\n%s", argv[1], written, want);
    if (strncmp(written, want, len) == 0) {
        train_config_t d = train_config_defaults();
        char *defaults = serialize(&d);
        for (char *line = strtok(written + len, "\n"); line; line = strtok(NULL, "\n")) {
            const char *at = strstr(defaults, line);
            EXPECT(at && (at == defaults || at[-1] == '\n') && at[strlen(line)] == '\n',
                   "%s: the appended row '%s' is not at its default", argv[1], line);
        }
        free(defaults);
        free(written);
        written = serialize(&c);
    }

    train_config_t back = train_config_defaults();
    opt_deserialize(&train_options, &back, want);
    char *again = serialize(&back);
    EXPECT(strcmp(again, written) == 0, "%s: reads back as\n%s\ninstead of\n%s", argv[1], again, written);
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
