// Table-driven command-line options: one table per subcommand gives parsing, range checks,
// --help text and the key=value serialisation stored in checkpoints.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef enum { OPT_INT, OPT_REAL, OPT_STR, OPT_FLAG } opt_type_t;

#define OPT_STR_MAX 512

typedef struct {
    const char *name;     // without the leading "--"
    opt_type_t type;
    size_t offset;        // offsetof(config struct, field): int64_t, double, char[OPT_STR_MAX], int
    double min, max;      // inclusive range for numbers; min == DBL_MIN means "> 0"
    const char *choices;  // "a|b|c" for strings with a fixed set of values, or NULL
    const char *help;
} opt_t;

typedef struct {
    const char *command;  // "train"
    const char *summary;  // one line
    const opt_t *opts;
    int count;
} opt_table_t;

// Parses "--name value" / "--name=value" / "--flag" into cfg. Positional arguments are
// returned through positional[] (up to max_positional). Bad input: one line naming the flag,
// every rank exits with SPK_EXIT_USAGE. "--help" prints the table and exits 0.
int opt_parse(const opt_table_t *t, void *cfg, int argc, char **argv, char **positional, int max_positional);
void opt_print_help(const opt_table_t *t);
// Appends "name=value\n" for every option to out (for checkpoints); returns bytes written.
size_t opt_serialize(const opt_table_t *t, const void *cfg, char *out, size_t cap);
// Sets every option found in a serialised text (the rest keep their values).
void opt_deserialize(const opt_table_t *t, void *cfg, const char *text);
// Finds the value of `name` in a serialised text; returns 0 and copies it, or -1.
int opt_lookup(const char *text, const char *name, char *out, size_t cap);
