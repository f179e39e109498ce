#include "app/cli/options.h"

#include "io/checkpoint.h"
#include "kernels/base/check.h"

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

static void set_value(const opt_table_t *t, const opt_t *o, void *cfg, const char *v) {
    char *field = (char *)cfg + o->offset;
    char *end = NULL;
    errno = 0;
    switch (o->type) {
    case OPT_INT: {
        long long x = strtoll(v, &end, 10);
        if (errno || !end || *end || end == v)
            spk_fail_all(SPK_EXIT_USAGE, "%s: --%s expects an integer, got '%s'", t->command, o->name, v);
        if ((double)x < o->min || (double)x > o->max)
            spk_fail_all(SPK_EXIT_USAGE, "%s: --%s must be in [%.17g, %.17g], got %s", t->command, o->name, o->min, o->max, v);
        *(int64_t *)field = x;
        break;
    }
    case OPT_REAL: {
        double x = strtod(v, &end);
        if (errno || !end || *end || end == v || !isfinite(x))
            spk_fail_all(SPK_EXIT_USAGE, "%s: --%s expects a finite number, got '%s'", t->command, o->name, v);
        if (o->min == DBL_MIN && (x <= 0 || x > o->max))
            spk_fail_all(SPK_EXIT_USAGE, "%s: --%s must be positive and at most %g, got %s", t->command, o->name, o->max, v);
        if (x < o->min || x > o->max)
            spk_fail_all(SPK_EXIT_USAGE, "%s: --%s must be in [%g, %g], got %s", t->command, o->name, o->min, o->max, v);
        *(double *)field = x;
        break;
    }
    case OPT_STR: {
        const size_t cap = o->max > 0 ? (size_t)o->max : OPT_STR_MAX;
        if (strlen(v) >= cap)
            spk_fail_all(SPK_EXIT_USAGE, "%s: --%s value is longer than %zu characters", t->command, o->name, cap - 1);
        if (o->choices && !in_choices(o->choices, v))
            spk_fail_all(SPK_EXIT_USAGE, "%s: --%s must be one of %s, got '%s'", t->command, o->name, o->choices, v);
        snprintf(field, cap, "%s", v);
        break;
    }
    case OPT_FLAG:
        *(int *)field = 1;
        break;
    }
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
        if (o->choices) printf(" (%s)", o->choices);
        if (o->type == OPT_STR && o->min >= 1) printf(" (required)");
        printf("\n");
    }
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

int opt_parse(const opt_table_t *t, void *cfg, int argc, char **argv, char **positional, int max_positional) {
    int npos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            opt_print_help(t);
            spk_exit_all(SPK_EXIT_OK);
        }
        if (strncmp(a, "--", 2) != 0) {
            if (npos >= max_positional)
                spk_fail_all(SPK_EXIT_USAGE, "%s: unexpected argument '%s' (see %s --help)", t->command, a, t->command);
            positional[npos++] = argv[i];
            continue;
        }
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const opt_t *o = find(t, name, len);
        if (!o) spk_fail_all(SPK_EXIT_USAGE, "%s: unknown option '%.*s' (see %s --help)", t->command, (int)len + 2, a, t->command);
        if (o->type == OPT_FLAG) {
            if (eq) spk_fail_all(SPK_EXIT_USAGE, "%s: --%s takes no value", t->command, o->name);
            set_value(t, o, cfg, "1");
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
        case OPT_INT: w = snprintf(out + n, cap - n, "%s=%lld\n", o->name, (long long)*(const int64_t *)field); break;
        case OPT_REAL: w = snprintf(out + n, cap - n, "%s=%.17g\n", o->name, *(const double *)field); break;
        case OPT_STR: w = snprintf(out + n, cap - n, "%s=%s\n", o->name, field); break;
        case OPT_FLAG: w = snprintf(out + n, cap - n, "%s=%d\n", o->name, *(const int *)field); break;
        }
        if (w < 0) break;
        n += (size_t)w;
    }
    return n < cap ? n : cap;
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
        if (o->type == OPT_FLAG) *(int *)((char *)cfg + o->offset) = atoi(v);
        else if (o->type != OPT_STR || v[0]) set_value(t, o, cfg, v);
        else ((char *)cfg + o->offset)[0] = 0;
    }
}
