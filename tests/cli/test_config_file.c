// --config files (io/common/config_yaml.c, opt_apply_config and opt_yaml in app/cli/options.c):
// what is read from good files, that every refusal names the file, the line and the key,
// that flags override the file, and that the YAML the trainer writes reads back to the very
// same configuration (checkpoint text byte for byte), whatever the strings hold.
#include "app/cli/options.h"
#include "app/cli/train_options.h"
#include "io/ckpt/checkpoint.h"
#include "kernels/base/check.h"
#include "tests/test_util.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int parse(const char *yaml, config_entries_t *c, char *err, size_t cap) {
    return config_yaml_parse(yaml, strlen(yaml), "r.yaml", c, err, cap);
}

// A good file: its entries in order, with their lines.
static void check_good(void) {
    const char *yaml =
        "# a recipe\n"
        "model: ecapa\n"
        "lr: 1e-3   # comment\n"
        "\n"
        "tf32: yes\n"
        "speed-perturb: [1.0, 0.9, 1.1]\n"
        "noise-snr:\n"
        "  - noise=0:15\n"
        "  - music=5:15\n"
        "resume:\n"
        "metrics: ~\n"
        "val-data: 'null'\n"
        "data: \"a b: c #d\"\n";
    config_entries_t c;
    char err[512] = "";
    EXPECT(parse(yaml, &c, err, sizeof err) == 0, "good file refused: %s", err);
    const struct {
        const char *key, *value;
        int line;
    } want[] = {{"model", "ecapa", 2},
                {"lr", "1e-3", 3},
                {"tf32", "yes", 5},
                {"speed-perturb", "1.0,0.9,1.1", 6},
                {"noise-snr", "noise=0:15,music=5:15", 7},
                {"resume", "", 10},
                {"metrics", "", 11},
                {"val-data", "null", 12},
                {"data", "a b: c #d", 13}};
    const int n = (int)(sizeof want / sizeof want[0]);
    EXPECT(c.n == n, "%d entries, want %d", c.n, n);
    for (int i = 0; i < n && i < c.n; i++)
        EXPECT(!strcmp(c.e[i].key, want[i].key) && !strcmp(c.e[i].value, want[i].value) && c.e[i].line == want[i].line,
               "entry %d: %s=%s (line %lld), want %s=%s (line %d)", i, c.e[i].key, c.e[i].value, (long long)c.e[i].line,
               want[i].key, want[i].value, want[i].line);
    config_entries_free(&c);
    // Nothing at all, comments only, an empty document: no entries.
    const char *empty[] = {"", "# nothing\n", "---\n", "---\n...\n", "{}\n"};
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        EXPECT(parse(empty[i], &c, err, sizeof err) == 0 && c.n == 0, "empty file %zu: %s", i, err);
        config_entries_free(&c);
    }
}

// Refusals: exit 2, and the message starts with the file and the line.
static void check_refused(void) {
    const struct {
        const char *yaml, *want;
    } cases[] = {
        {"lr: 1\n  x: 2\n", "r.yaml:2: YAML syntax: mapping values are not allowed"},
        {"lr: [1, 2\n", "r.yaml:2: YAML syntax: did not find expected ',' or ']'"},
        {"- lr\n- 1\n", "r.yaml:1: expected a mapping of option names to values"},
        {"just words\n", "r.yaml:1: expected a mapping"},
        {"lr: 1\n---\nlr: 2\n", "r.yaml:2: a second YAML document"},
        {"lr: 1\nmodel:\n  name: ecapa\n", "r.yaml:2: 'model' has a mapping as its value"},
        {"lr: 1\nlr: 2\n", "r.yaml:2: 'lr' again (first on line 1)"},
        {"data: &d x.h5\nval-data: *d\n", "r.yaml:2: 'val-data': aliases"},
        {"speed-perturb: [[1, 2]]\n", "r.yaml:1: 'speed-perturb': list items must be scalars"},
        {"? [a, b]\n: 1\n", "r.yaml:1: keys must be option names"},
        {"data: |\n  a\n  b\n", "r.yaml:1: the value of 'data' spans lines"},
        {"data: \"a\\tb\"\n", "r.yaml:1: the value of 'data' holds a control character (byte 0x09)"},
        {"'': 1\n", "r.yaml:1: an empty key"},
        {"lr: 1\ndata: \xff\n", "r.yaml:2: YAML syntax: invalid leading UTF-8 octet"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        config_entries_t c;
        char err[512] = "";
        const int rc = parse(cases[i].yaml, &c, err, sizeof err);
        EXPECT(rc == SPK_EXIT_USAGE && strncmp(err, cases[i].want, strlen(cases[i].want)) == 0,
               "case %zu: rc %d, '%s', want '%s'", i, rc, err, cases[i].want);
        EXPECT(c.n == 0 && c.e == NULL, "case %zu: entries left after a refusal", i);
    }
    config_entries_t c;
    char err[512] = "";
    const char nul[] = "lr: 1\nda\0ta: x\n";
    EXPECT(config_yaml_parse(nul, sizeof nul - 1, "r.yaml", &c, err, sizeof err) == SPK_EXIT_USAGE &&
               strstr(err, "r.yaml:2: holds a NUL byte"),
           "NUL byte: %s", err);
}

// Keys against the train table: unknown keys and bad values name the line and the key.
static void check_apply(void) {
    const struct {
        const char *yaml, *want;
    } cases[] = {
        {"data: x.h5\nlrr: 1\n", "r.yaml:2: unknown key 'lrr': spkddp train has no --lrr"},
        {"lr: fast\n", "r.yaml:1: key 'lr' expects a finite number, got 'fast'"},
        {"lr: [1, 2]\n", "r.yaml:1: key 'lr' expects a finite number, got '1,2'"},
        {"\n\nepochs: 0\n", "r.yaml:3: key 'epochs' must be in [1, "},
        {"epochs: 2.5\n", "r.yaml:1: key 'epochs' expects an integer, got '2.5'"},
        {"optimizer: lamb\n", "r.yaml:1: key 'optimizer' must be one of sgd|adam|adamw, got 'lamb'"},
        {"tf32: maybe\n", "r.yaml:1: key 'tf32' is a switch: true or false, got 'maybe'"},
        {"tf32:\n", "r.yaml:1: key 'tf32' is a switch"},
        {"lr:\n", "r.yaml:1: key 'lr' expects a finite number, got ''"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        config_entries_t c;
        char err[512] = "";
        EXPECT(parse(cases[i].yaml, &c, err, sizeof err) == 0, "case %zu does not parse: %s", i, err);
        train_config_t cfg = train_config_defaults();
        const int rc = opt_apply_config(&train_options, &cfg, &c, "r.yaml", err, sizeof err);
        EXPECT(rc == SPK_EXIT_USAGE && strncmp(err, cases[i].want, strlen(cases[i].want)) == 0,
               "case %zu: rc %d, '%s', want '%s'", i, rc, err, cases[i].want);
        config_entries_free(&c);
    }
}

static char *serialize(const train_config_t *c) {
    char *text = calloc(1, CKPT_CONFIG_MAX);
    opt_serialize(&train_options, c, text, CKPT_CONFIG_MAX);
    return text;
}

// opt_parse with --config: the file's values, then the flags over them.
static void check_flags_override(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/recipe.yaml", dir);
    FILE *f = fopen(path, "w");
    fputs("data: file.h5\nlr: 0.5\ntf32: true\nepochs: 7\nspeed-perturb: [1.0, 0.9]\n", f);
    fclose(f);
    char *argv[] = {"--lr", "0.25", "--config", path, "--tf32=false", "--seed=9"};
    train_config_t c = train_config_defaults();
    opt_parse(&train_options, &c, 6, argv, NULL, 0);
    EXPECT(!strcmp(c.data, "file.h5") && c.epochs == 7 && !strcmp(c.aug.speed, "1.0,0.9"), "file values not applied");
    EXPECT(c.lr == 0.25 && c.tf32 == 0 && c.seed == 9, "flags do not override the file: lr %g tf32 %d seed %lld", c.lr,
           c.tf32, (long long)c.seed);
    unlink(path);
}

// Configs whose YAML must read back exactly: numbers that need all 17 digits, strings that
// look like other YAML types or need quoting.

// Numbers holding a default outside their flag's range (--frames' 0): the YAML leaves them out.
static int unspellable_defaults(const train_config_t *c) {
    int n = 0;
    for (int i = 0; i < train_options.count; i++) {
        const opt_t *o = &train_options.opts[i];
        const char *field = (const char *)c + o->offset;
        double x = o->type == OPT_INT    ? (double)*(const int64_t *)field
                   : o->type == OPT_REAL ? *(const double *)field
                                         : 0;
        if ((o->type == OPT_INT || o->type == OPT_REAL) && !((o->min == DBL_MIN ? x > 0 : x >= o->min) && x <= o->max))
            n++;
    }
    return n;
}

static void check_round_trip(void) {
    const char *strings[] = {
        "",       "null", "~",     "true", "0.5",   "a: b",     "#x",   " lead", "trail ", "it's",
        "\"q\"",  "[x]",  "{y}",   "- z",  "&a",    "*b",       "!tag", "%p",    "@at",    "`tick",
        "sp ace", "yes",  "12:30", "0x1f", "1_000", "äöü/日本", ">f",   "|l",    "a,b,c",  "noise=0:15,music=5:15",
        "..",     "---",  "...",   "?q"};
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
        train_config_t c = train_config_defaults();
        snprintf(c.data, sizeof c.data, "%s", strings[i]);
        snprintf(c.aug.noise_snr, sizeof c.aug.noise_snr, "%s",
                 strings[(i + 7) % (sizeof strings / sizeof strings[0])]);
        c.lr = 0.1 + 1e-17 * (double)i;
        c.weight_decay = 1.0 / 3.0;
        c.momentum = 0.9;
        c.tf32 = (int)(i & 1);
        c.seed = 8999999999999000 + (int64_t)i;  // beyond 2^53: exact as an integer only
        char *yaml = opt_yaml(&train_options, &c, "a header\nof two lines");
        EXPECT(yaml != NULL, "'%s': no YAML", strings[i]);
        if (!yaml) continue;
        config_entries_t e;
        char err[512] = "";
        train_config_t back = train_config_defaults();
        EXPECT(config_yaml_parse(yaml, strlen(yaml), "w.yaml", &e, err, sizeof err) == 0 &&
                   opt_apply_config(&train_options, &back, &e, "w.yaml", err, sizeof err) == 0,
               "'%s': the written YAML is refused: %s", strings[i], err);
        char *want = serialize(&c), *got = serialize(&back);
        EXPECT(strcmp(want, got) == 0, "'%s': reads back as\n%s\ninstead of\n%s", strings[i], got, want);
        EXPECT(e.n == train_options.count - unspellable_defaults(&c), "'%s': %d keys written, the table has %d",
               strings[i], e.n, train_options.count);
        free(want);
        free(got);
        free(yaml);
        config_entries_free(&e);
    }
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : ".";
    check_good();
    check_refused();
    check_apply();
    check_flags_override(dir);
    check_round_trip();
    return test_report("test_config_file");
}
