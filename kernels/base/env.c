#include "kernels/base/env.h"

#include "kernels/base/check.h"

#include <stdlib.h>
#include <string.h>

int spk_env_switch(const char *name) {
    const char *v = getenv(name);
    if (!v || !v[0] || strcmp(v, "0") == 0) return 0;
    if (strcmp(v, "1") == 0) return 1;
    spk_die(SPK_EXIT_USAGE, "%s='%s' must be 1 (on) or 0 (off, the default)", name, v);
}

int spk_env_choice(const char *name, const char *choices) {
    const char *v = getenv(name);
    if (!v || !v[0]) return -1;
    const size_t n = strlen(v);
    int index = 0;
    for (const char *c = choices; *c; index++) {
        const char *bar = strchr(c, '|');
        const size_t len = bar ? (size_t)(bar - c) : strlen(c);
        if (len == n && strncmp(c, v, n) == 0) return index;
        c += len + (bar != NULL);
    }
    spk_die(SPK_EXIT_USAGE, "%s='%s' must be one of %s", name, v, choices);
}

double spk_env_number(const char *name, double fallback, double lo, double hi) {
    const char *v = getenv(name);
    if (!v || !v[0]) return fallback;
    char *end = NULL;
    const double x = strtod(v, &end);
    if (*end || !(x >= lo && x <= hi))
        spk_die(SPK_EXIT_USAGE, "%s='%s' must be a number from %g to %g", name, v, lo, hi);
    return x;
}
