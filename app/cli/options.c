#include "app/cli/options.h"

#include "io/ckpt/checkpoint.h"
#include "kernels/base/check.h"
#include "kernels/base/mpi_wait.h"

#include <mpi.h>

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const opt_t *find(const opt_table_t *t, const char *name, size_t len) {
    for (int i = 0; i < t->count; i++)
        if (strlen(t->opts[i].name) == len && strncmp(t->opts[i].name, name, len) == 0) return &t->opts[i];
    return NULL;
}

static int in_choices(const char *choices, const char *v) {
    size_t n = strlen(v);
    for (const char *p = choices; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, v, n) == 0) return 1;
        if (!bar) break;
        p = bar + 1;
    }
    return 0;
}

// The row's fixed set of values ("a|b|c"), or NULL.
static const char *choices_of(const opt_t *o) { return o->choices_of ? o->choices_of() : o->choices; }

// YAML 1.1's words for a switch, and 1/0 as checkpoints store them.
static int parse_switch(const char *v, int *on) {
    static const char *yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "1"};
    static const char *no[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "0"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcmp(v, yes[i]) == 0) return *on = 1, 0;
        if (strcmp(v, no[i]) == 0) return *on = 0, 0;
    }
    return -1;
}

// Checks v against the row's type and range and stores it in cfg. Returns 0, or -1 with the
// reason in why ("expects an integer, got 'x'"); the caller names the flag or the config key.
static int store_value(const opt_t *o, void *cfg, const char *v, char *why, size_t cap) {
    char *field = (char *)cfg + o->offset;
    char *end = NULL;
    errno = 0;
    switch (o->type) {
        case OPT_INT: {
            long long x = strtoll(v, &end, 10);
            if (errno || !end || *end || end == v) return snprintf(why, cap, "expects an integer, got '%s'", v), -1;
            if ((double)x < o->min || (double)x > o->max)
                return snprintf(why, cap, "must be in [%.17g, %.17g], got %s", o->min, o->max, v), -1;
            *(int64_t *)field = x;
            return 0;
        }
        case OPT_REAL: {
            double x = strtod(v, &end);
            if (errno || !end || *end || end == v || !isfinite(x))
                return snprintf(why, cap, "expects a finite number, got '%s'", v), -1;
            if (o->min == DBL_MIN && (x <= 0 || x > o->max))
                return snprintf(why, cap, "must be positive and at most %g, got %s", o->max, v), -1;
            if (x < o->min || x > o->max)
                return snprintf(why, cap, "must be in [%g, %g], got %s", o->min, o->max, v), -1;
            *(double *)field = x;
            return 0;
        }
        case OPT_STR: {
            const size_t cap_field = o->max > 0 ? (size_t)o->max : OPT_STR_MAX;
            if (strlen(v) >= cap_field)
                return snprintf(why, cap, "value is longer than %zu characters", cap_field - 1), -1;
            const char *choices = choices_of(o);
            if (choices && !in_choices(choices, v))
                return snprintf(why, cap, "must be one of %s, got '%s'", choices, v), -1;
            snprintf(field, cap_field, "%s", v);
            return 0;
        }
        case OPT_FLAG:
            if (parse_switch(v, (int *)field) != 0)
                return snprintf(why, cap, "is a switch: true or false, got '%s'", v), -1;
            return 0;
    }
    return 0;
}

// A flag's value: a bad one stops every rank with the flag named.
static void set_value(const opt_table_t *t, const opt_t *o, void *cfg, const char *v) {
    char why[OPT_STR_MAX + 256];
    if (store_value(o, cfg, v, why, sizeof why) != 0)
        spk_fail_all(SPK_EXIT_USAGE, "%s: --%s %s", t->command, o->name, why);
}

static void opt_print_help(const opt_table_t *t) {
    if (spk_rank() != 0) return;
    printf("usage: spkddp %s [options]\n%s\n\noptions:\n", t->command, t->summary);
    for (int i = 0; i < t->count; i++) {
        const opt_t *o = &t->opts[i];
        const char *arg = o->type == OPT_INT ? " N" : o->type == OPT_REAL ? " X" : o->type == OPT_STR ? " S" : "";
        char left[64];
        snprintf(left, sizeof left, "--%s%s", o->name, arg);
        printf("  %-24s %s", left, o->help);
        if (choices_of(o)) printf(" (%s)", choices_of(o));
        if (o->type == OPT_STR && o->min >= 1) printf(" (required)");
        printf("\n");
    }
    printf("  %-24s %s\n", "--config F",
           "a YAML file of these options (keys are the flag names without --; flags given here override it)");
    fflush(stdout);
}

// Required strings left empty: one line naming them all ("--a, --b and --c are required").
static void check_required(const opt_table_t *t, const void *cfg) {
    const char *missing[32];
    int n = 0;
    for (int i = 0; i < t->count && n < 32; i++) {
        const opt_t *o = &t->opts[i];
        if (o->type == OPT_STR && o->min >= 1 && !((const char *)cfg + o->offset)[0]) missing[n++] = o->name;
    }
    if (n == 0) return;
    char list[1024] = "";
    for (int i = 0; i < n; i++) {
        size_t len = strlen(list);
        snprintf(list + len, sizeof list - len, "%s--%s", i == 0 ? "" : i == n - 1 ? " and " : ", ", missing[i]);
    }
    spk_fail_all(SPK_EXIT_USAGE, "%s: %s %s required (see %s --help)", t->command, list, n > 1 ? "are" : "is",
                 t->command);
}

int opt_apply_config(const opt_table_t *t, void *cfg, const config_entries_t *c, const char *path, char *err,
                     size_t cap) {
    for (int i = 0; i < c->n; i++) {
        const config_entry_t *e = &c->e[i];
        const opt_t *o = find(t, e->key, strlen(e->key));
        if (!o) {
            snprintf(err, cap,
                     "%s:%lld: unknown key '%.100s': spkddp %s has no --%.100s (spkddp %s --help lists the keys)", path,
                     (long long)e->line, e->key, t->command, e->key, t->command);
            return SPK_EXIT_USAGE;
        }
        char why[OPT_STR_MAX + 256];
        if (store_value(o, cfg, e->value, why, sizeof why) != 0) {
            snprintf(err, cap, "%s:%lld: key '%s' %s", path, (long long)e->line, o->name, why);
            return SPK_EXIT_USAGE;
        }
    }
    return 0;
}

// --config's file into cfg. Rank 0 reads, parses and applies it; the others get its verdict
// and the text, and parse and apply the same text (so they reach the same config).
static void load_config(const opt_table_t *t, void *cfg, const char *path) {
    struct {
        int code;
        char err[1024];
        int64_t len;
    } v = {0};
    char *text = NULL;
    size_t len = 0;
    config_entries_t c = {0};
    int mpi = 0, done = 0;
    MPI_Initialized(&mpi);
    if (mpi) MPI_Finalized(&done);
    const int ranks = mpi && !done ? spk_world() : 1;
    if (spk_rank() == 0) {
        v.code = config_yaml_read_file(path, &text, &len, v.err, sizeof v.err);
        if (!v.code) v.code = config_yaml_parse(text, len, path, &c, v.err, sizeof v.err);
        if (!v.code) v.code = opt_apply_config(t, cfg, &c, path, v.err, sizeof v.err);
        v.len = (int64_t)len;
    }
    if (ranks > 1) {
        SPK_COLLECTIVE("the broadcast of the config file", MPI_Ibcast, &v, sizeof v, MPI_BYTE, 0, MPI_COMM_WORLD);
        if (!v.code) {
            if (spk_rank() != 0) text = callocCheck(1, (size_t)v.len + 1);
            SPK_COLLECTIVE("the broadcast of the config file", MPI_Ibcast, text, (int)v.len, MPI_BYTE, 0,
                           MPI_COMM_WORLD);
            if (spk_rank() != 0 && config_yaml_parse(text, (size_t)v.len, path, &c, v.err, sizeof v.err) == 0)
                opt_apply_config(t, cfg, &c, path, v.err, sizeof v.err);
        }
    }
    config_entries_free(&c);
    free(text);
    if (v.code) spk_fail_all(v.code, "%s", v.err);
}

// The file of "--config F" / "--config=F" (NULL: none). Other options' values are stepped
// over, so a value that happens to read "--config" is not taken for the option.
static const char *config_path(const opt_table_t *t, int argc, char **argv) {
    const char *path = NULL;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) != 0) continue;
        const char *name = argv[i] + 2, *eq = strchr(name, '=');
        const size_t len = eq ? (size_t)(eq - name) : strlen(name);
        if (len == 6 && strncmp(name, "config", 6) == 0) {
            if (path) spk_fail_all(SPK_EXIT_USAGE, "%s: --config is given twice; one file per command", t->command);
            path = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
            if (!path || !path[0]) spk_fail_all(SPK_EXIT_USAGE, "%s: --config needs a file", t->command);
            continue;
        }
        const opt_t *o = find(t, name, len);
        if (o && o->type != OPT_FLAG && !eq) i++;
    }
    return path;
}

int opt_parse(const opt_table_t *t, void *cfg, int argc, char **argv, char **positional, int max_positional) {
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            opt_print_help(t);
            spk_exit_all(SPK_EXIT_OK);
        }
    const char *config = config_path(t, argc, argv);
    if (config) load_config(t, cfg, config);  // the file first: flags override it
    int npos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            if (npos >= max_positional)
                spk_fail_all(SPK_EXIT_USAGE, "%s: unexpected argument '%s' (see %s --help)", t->command, a, t->command);
            positional[npos++] = argv[i];
            continue;
        }
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        if (len == 6 && strncmp(name, "config", 6) == 0) {
            i += !eq;  // read above
            continue;
        }
        const opt_t *o = find(t, name, len);
        if (!o)
            spk_fail_all(SPK_EXIT_USAGE, "%s: unknown option '%.*s' (see %s --help)", t->command, (int)len + 2, a,
                         t->command);
        if (o->type == OPT_FLAG) {
            set_value(t, o, cfg, eq ? eq + 1 : "1");  // --flag, or --flag=false against a config file
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) spk_fail_all(SPK_EXIT_USAGE, "%s: --%s needs a value", t->command, o->name);
        set_value(t, o, cfg, v);
    }
    check_required(t, cfg);
    return npos;
}

size_t opt_serialize(const opt_table_t *t, const void *cfg, char *out, size_t cap) {
    size_t n = 0;
    for (int i = 0; i < t->count && n < cap; i++) {
        const opt_t *o = &t->opts[i];
        const char *field = (const char *)cfg + o->offset;
        int w = 0;
        switch (o->type) {
            case OPT_INT:
                w = snprintf(out + n, cap - n, "%s=%lld\n", o->name, (long long)*(const int64_t *)field);
                break;
            case OPT_REAL:
                w = snprintf(out + n, cap - n, "%s=%.17g\n", o->name, *(const double *)field);
                break;
            case OPT_STR:
                w = snprintf(out + n, cap - n, "%s=%s\n", o->name, field);
                break;
            case OPT_FLAG:
                w = snprintf(out + n, cap - n, "%s=%d\n", o->name, *(const int *)field);
                break;
        }
        if (w < 0) break;
        n += (size_t)w;
    }
    return n < cap ? n : cap;
}

void opt_format_real(double x, char *out, size_t cap) {
    if (x == floor(x) && fabs(x) < 1e15) {
        snprintf(out, cap, "%.0f", x);
        return;
    }
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(out, cap, "%.*g", digits, x);
        if (strtod(out, NULL) == x) return;
    }
}

// Whether a number is one the flag accepts. A default outside the range (--frames' 0, "the
// model's own") is left out of a written configuration, so reading it back keeps the default.
static int in_range(const opt_t *o, double x) { return (o->min == DBL_MIN ? x > 0 : x >= o->min) && x <= o->max; }

char *opt_yaml(const opt_table_t *t, const void *cfg, const char *header) {
    char *kv = NULL, *yaml = NULL;
    size_t kv_len = 0, yaml_len = 0;
    FILE *f = open_memstream(&kv, &kv_len);
    if (!f) spk_die(SPK_EXIT_FAILURE, "out of memory writing the configuration");
    for (int i = 0; i < t->count; i++) {
        const opt_t *o = &t->opts[i];
        const char *field = (const char *)cfg + o->offset;
        char num[64];
        switch (o->type) {
            case OPT_INT:
                if (!in_range(o, (double)*(const int64_t *)field)) break;  // a default no flag can spell
                fprintf(f, "%s=%lld\n", o->name, (long long)*(const int64_t *)field);
                break;
            case OPT_REAL:
                if (!in_range(o, *(const double *)field)) break;
                opt_format_real(*(const double *)field, num, sizeof num);
                fprintf(f, "%s=%s\n", o->name, num);
                break;
            case OPT_STR:
                fprintf(f, "%s=%s\n", o->name, field);
                break;
            case OPT_FLAG:
                fprintf(f, "%s=%s\n", o->name, *(const int *)field ? "true" : "false");
                break;
        }
    }
    if (fclose(f) != 0) spk_die(SPK_EXIT_FAILURE, "out of memory writing the configuration");
    FILE *y = open_memstream(&yaml, &yaml_len);
    if (!y) spk_die(SPK_EXIT_FAILURE, "out of memory writing the configuration");
    const int rc = config_yaml_write(y, header, kv);
    if (fclose(y) != 0) spk_die(SPK_EXIT_FAILURE, "out of memory writing the configuration");
    free(kv);
    if (rc != 0) {
        free(yaml);
        return NULL;
    }
    return yaml;
}

// The field already holds the value text spells: a default no flag can spell (--frames'
// 0, "the model's own") stays what it is.
static int holds(const opt_t *o, const void *cfg, const char *v) {
    const char *field = (const char *)cfg + o->offset;
    char *end = NULL;
    if (o->type == OPT_INT) {
        long long x = strtoll(v, &end, 10);
        return end && !*end && end != v && x == *(const int64_t *)field;
    }
    if (o->type == OPT_REAL) {
        double x = strtod(v, &end);
        return end && !*end && end != v && x == *(const double *)field;
    }
    return 0;
}

void opt_deserialize(const opt_table_t *t, void *cfg, const char *text) {
    char v[OPT_STR_MAX];
    for (int i = 0; i < t->count; i++) {
        const opt_t *o = &t->opts[i];
        if (ckpt_config_value(text, o->name, v, sizeof v) != 0 || holds(o, cfg, v)) continue;
        if (o->type == OPT_FLAG)
            *(int *)((char *)cfg + o->offset) = atoi(v);
        else if (o->type != OPT_STR || v[0])
            set_value(t, o, cfg, v);
        else
            ((char *)cfg + o->offset)[0] = 0;
    }
}
