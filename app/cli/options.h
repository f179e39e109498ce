// Table-driven command-line options: one table per subcommand gives parsing, range checks,
// --help text and the key=value serialisation stored in checkpoints. A command declares the
// struct it parses into and one row per flag, with the row macros below; flags that several
// commands share (--device, --precision, --batch, --channels, --seed) have one row each in
// app/cli/common_options.h:
//
//   typedef struct { char data[OPT_STR_MAX]; int64_t batch; } embed_opts_t;  // or nested structs
//   static const opt_t rows[] = {
//       OPT_TEXT(embed_opts_t, data, "data", OPT_REQUIRED, "dataset to embed"),
//       OPT_BATCH(embed_opts_t, batch),
//   };
//   static const opt_table_t table = OPT_TABLE("embed", "Embed every utterance ...", rows);
#pragma once
#include "io/common/config_yaml.h"

#include <stddef.h>
#include <stdint.h>

typedef enum { OPT_INT, OPT_REAL, OPT_STR, OPT_FLAG } opt_type_t;

#define OPT_STR_MAX 512  // path fields, and the longest value opt_deserialize reads

typedef struct {
    const char *name;  // without the leading "--"
    opt_type_t type;
    size_t offset;        // offsetof(config struct, field): int64_t, double, char[], int
    double min, max;      // numbers: inclusive range (min == DBL_MIN means "> 0"); strings:
                          // min 1 (OPT_REQUIRED): the flag must be given; max: sizeof the
                          // char array (0: OPT_STR_MAX)
    const char *choices;  // "a|b|c" for strings with a fixed set of values, or NULL
    const char *help;
    const char *(*choices_of)(void);  // the same, known only when the program runs (NULL: choices)
} opt_t;

typedef struct {
    const char *command;  // "train"
    const char *summary;  // one line
    const opt_t *opts;
    int count;
} opt_table_t;

// ---- rows ---------------------------------------------------------------------------------
// The field's offset in T; a compile error when its type is not what the row stores there.
#define OPT_FIELD(T, field, ctype) (offsetof(T, field) + 0 * sizeof(char[_Generic(((T *)0)->field, ctype : 1)]))
#define OPT_SIZEOF(T, field)       sizeof(((T *)0)->field)
#define OPT_REQUIRED               1  // for OPT_TEXT
#define OPT_OPTIONAL               0

#define OPT_TEXT(T, field, name, required, help) \
    { name, OPT_STR, OPT_FIELD(T, field, char *), required, OPT_SIZEOF(T, field), NULL, help, NULL }
#define OPT_CHOICE(T, field, name, choices, help) \
    { name, OPT_STR, OPT_FIELD(T, field, char *), 0, OPT_SIZEOF(T, field), choices, help, NULL }
// A choice among values that another layer lists (the models of app/model/registry.h).
#define OPT_CHOICE_OF(T, field, name, choices_of, help) \
    { name, OPT_STR, OPT_FIELD(T, field, char *), 0, OPT_SIZEOF(T, field), NULL, help, choices_of }
#define OPT_INTEGER(T, field, name, lo, hi, help) \
    { name, OPT_INT, OPT_FIELD(T, field, int64_t), lo, hi, NULL, help, NULL }
#define OPT_NUMBER(T, field, name, lo, hi, help) \
    { name, OPT_REAL, OPT_FIELD(T, field, double), lo, hi, NULL, help, NULL }
#define OPT_SWITCH(T, field, name, help) \
    { name, OPT_FLAG, OPT_FIELD(T, field, int), 0, 0, NULL, help, NULL }

// A command's table from its array of rows.
#define OPT_TABLE(command, summary, rows) \
    { command, summary, rows, (int)(sizeof rows / sizeof rows[0]) }

// ---- parsing ------------------------------------------------------------------------------
// Parses "--name value" / "--name=value" / "--flag" (or "--flag=false") into cfg. Positional
// arguments are returned through positional[] (up to max_positional). "--config F" (every
// command) first sets options from a YAML file whose keys are the flag names (io/common/config_yaml.h);
// the flags then override it. Rank 0 reads the file and every rank applies the same text.
// Bad input, or a required flag left out: one line naming the flag (or the file, line and
// key), every rank exits with SPK_EXIT_USAGE. "--help" prints the table and exits 0.
int opt_parse(const opt_table_t *t, void *cfg, int argc, char **argv, char **positional, int max_positional);
// Sets the options of a parsed config file (path names it in messages). Returns 0, or
// SPK_EXIT_USAGE with "path:line: ..." in err for an unknown key or a bad value.
int opt_apply_config(const opt_table_t *t, void *cfg, const config_entries_t *c, const char *path, char *err,
                     size_t cap);
// Appends "name=value\n" for every option to out (for checkpoints); returns bytes written.
size_t opt_serialize(const opt_table_t *t, const void *cfg, char *out, size_t cap);
// The shortest %g form of x that reads back as x (0.2, not 0.20000000000000001; 30, not 3e+01).
void opt_format_real(double x, char *out, size_t cap);
// The options as a YAML document that --config reads back to the same values (reals in their
// shortest exact form, switches true/false), under `header` as a comment (may be NULL).
// malloc'ed; NULL when a value cannot be written as YAML (not UTF-8).
char *opt_yaml(const opt_table_t *t, const void *cfg, const char *header);
// Sets every option found in a serialised text (the rest keep their values). A value out of
// the table's range stops every rank as a bad flag would, unless the field already holds it
// (a default that no flag can spell, like --frames 0: the model's own crop length).
void opt_deserialize(const opt_table_t *t, void *cfg, const char *text);
