// Configuration files in YAML (libyaml): one mapping from option names (a command's flags
// without the leading "--") to values, as `--config recipe.yaml` reads and as the trainer
// writes its effective configuration:
//
//   model: ecapa
//   lr: 0.001            # numbers, words and paths are plain scalars
//   tf32: true           # switches: true/false (also yes/no, on/off, 1/0)
//   speed-perturb: [1.0, 0.9, 1.1]   # a list of scalars is read as "1.0,0.9,1.1"
//   resume:              # empty (or ~, null): the empty string
//
// The parser checks only the shape; what each key means, and whether its value is valid, is
// the option table's business (app/cli/options.h). Refused, with the file and line named:
// YAML syntax errors, a document that is not a mapping, nested mappings, aliases, keys that
// are not scalars, a key given twice, a value spanning lines or holding control characters,
// and a second document.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CONFIG_YAML_MAX_BYTES (1 << 20)  // a config file larger than this is not a recipe

typedef struct {
    int64_t line;  // 1-based line of the key
    char *key;
    char *value;  // a list's items joined with ','; "" for an empty or null value
} config_entry_t;

typedef struct {
    int n, cap;
    config_entry_t *e;  // in file order
} config_entries_t;

// Parses len bytes of YAML (called path in messages) into out. Returns 0, or SPK_EXIT_USAGE
// with one sentence "path:line: ..." in err (out is then empty).
int config_yaml_parse(const char *text, size_t len, const char *path, config_entries_t *out, char *err, size_t cap);
void config_entries_free(config_entries_t *c);

// Reads a whole config file into a malloc'ed, NUL-terminated buffer. Returns 0, or
// SPK_EXIT_USAGE with a sentence naming the file in err (missing, unreadable, too large).
int config_yaml_read_file(const char *path, char **text, size_t *len, char *err, size_t cap);

// Writes "key=value" lines (an option table's serialised config) as a YAML mapping to f, each
// value a scalar that config_yaml_parse reads back to the same text; `header` (may be NULL)
// becomes a comment above it. Returns 0, or -1 when libyaml or the stream fails.
int config_yaml_write(FILE *f, const char *header, const char *kv_text);
// Writes the text `yaml` to dir/name (dir created if missing), replacing it atomically
// (io/common/atomic_file.h). Returns 0, or -1 with a sentence in err.
int config_yaml_save(const char *dir, const char *name, const char *yaml, char *err, size_t cap);
