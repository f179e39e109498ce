#include "io/common/config_yaml.h"

#include "io/common/atomic_file.h"
#include "kernels/base/check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

// ---- entries -------------------------------------------------------------------------------

static char *dup_text(const char *s, size_t n) {
    char *d = mallocCheck(n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

static void push(config_entries_t *c, int64_t line, char *key, char *value) {
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 32;
        config_entry_t *g = realloc(c->e, (size_t)c->cap * sizeof *g);
        if (!g) spk_die(SPK_EXIT_FAILURE, "out of memory reading a config file");
        c->e = g;
    }
    c->e[c->n++] = (config_entry_t){line, key, value};
}

void config_entries_free(config_entries_t *c) {
    for (int i = 0; i < c->n; i++) {
        free(c->e[i].key);
        free(c->e[i].value);
    }
    free(c->e);
    memset(c, 0, sizeof *c);
}

// ---- parsing -------------------------------------------------------------------------------

typedef struct {
    yaml_parser_t parser;
    const char *text;
    size_t len;
    const char *path;
    char *err;
    size_t cap;
} reader_t;

static int fail(reader_t *r, int64_t line, const char *fmt, ...) SPK_PRINTF(3, 4);
static int fail(reader_t *r, int64_t line, const char *fmt, ...) {
    int n = line > 0 ? snprintf(r->err, r->cap, "%s:%lld: ", r->path, (long long)line)
                     : snprintf(r->err, r->cap, "%s: ", r->path);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < r->cap) vsnprintf(r->err + n, r->cap - (size_t)n, fmt, ap);
    va_end(ap);
    return SPK_EXIT_USAGE;
}

static int64_t line_of(const yaml_event_t *ev) { return (int64_t)ev->start_mark.line + 1; }

// The line of a byte offset (libyaml's reader errors give only the offset).
static int64_t line_at(const reader_t *r, size_t offset) {
    int64_t line = 1;
    for (size_t i = 0; i < offset && i < r->len; i++) line += r->text[i] == '\n';
    return line;
}

// The next event, or a syntax error named by line.
static int next(reader_t *r, yaml_event_t *ev) {
    if (yaml_parser_parse(&r->parser, ev)) return 0;
    const yaml_parser_t *p = &r->parser;
    const int64_t line =
        p->error == YAML_READER_ERROR ? line_at(r, p->problem_offset) : (int64_t)p->problem_mark.line + 1;
    return fail(r, line, "YAML syntax: %s%s%s", p->problem ? p->problem : "unknown error", p->context ? " " : "",
                p->context ? p->context : "");
}

static int is_null(const yaml_event_t *ev) {
    if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return 0;
    const char *v = (const char *)ev->data.scalar.value;
    return !v[0] || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL");
}

// A scalar's text, refused when it spans lines or holds other control characters.
static int scalar_text(reader_t *r, const yaml_event_t *ev, const char *what, char **out) {
    const char *v = (const char *)ev->data.scalar.value;
    const size_t n = ev->data.scalar.length;
    for (size_t i = 0; i < n; i++) {
        const unsigned char ch = (unsigned char)v[i];
        if (ch == '\n') return fail(r, line_of(ev), "%s spans lines; values are one line", what);
        if (ch < 0x20 || ch == 0x7f)
            return fail(r, line_of(ev), "%s holds a control character (byte 0x%02x)", what, ch);
    }
    *out = is_null(ev) ? dup_text("", 0) : dup_text(v, n);
    return 0;
}

// A value: a scalar, or a list of scalars joined with ','.
static int read_value(reader_t *r, const char *key, int64_t key_line, yaml_event_t *ev, char **out) {
    char what[160];
    snprintf(what, sizeof what, "the value of '%.100s'", key);
    switch (ev->type) {
        case YAML_SCALAR_EVENT:
            return scalar_text(r, ev, what, out);
        case YAML_ALIAS_EVENT:
            return fail(r, line_of(ev), "'%s': aliases (*name) are not supported in config files", key);
        case YAML_MAPPING_START_EVENT:
            return fail(r, key_line, "'%s' has a mapping as its value; values are scalars or lists of scalars", key);
        case YAML_SEQUENCE_START_EVENT:
            break;
        default:
            return fail(r, line_of(ev), "'%s' has no value", key);
    }
    size_t len = 0, cap = 64;
    char *joined = callocCheck(1, cap);
    for (;;) {
        yaml_event_t item;
        int rc = next(r, &item);
        if (rc) {
            free(joined);
            return rc;
        }
        if (item.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&item);
            break;
        }
        char *text = NULL;
        rc = item.type == YAML_SCALAR_EVENT ? scalar_text(r, &item, what, &text)
                                            : fail(r, line_of(&item), "'%s': list items must be scalars", key);
        yaml_event_delete(&item);
        if (rc) {
            free(joined);
            return rc;
        }
        const size_t n = strlen(text);
        if (len + n + 2 > cap) {
            while (len + n + 2 > cap) cap *= 2;
            char *g = realloc(joined, cap);
            if (!g) spk_die(SPK_EXIT_FAILURE, "out of memory reading a config file");
            joined = g;
        }
        if (len) joined[len++] = ',';
        memcpy(joined + len, text, n + 1);
        len += n;
        free(text);
    }
    *out = joined;
    return 0;
}

static int find_key(const config_entries_t *c, const char *key) {
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->e[i].key, key) == 0) return i;
    return -1;
}

// The body of the one mapping, up to its end.
static int read_mapping(reader_t *r, config_entries_t *out) {
    for (;;) {
        yaml_event_t k;
        int rc = next(r, &k);
        if (rc) return rc;
        if (k.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&k);
            return 0;
        }
        char *key = NULL;
        if (k.type != YAML_SCALAR_EVENT)
            rc = fail(r, line_of(&k), "keys must be option names (scalars)");
        else
            rc = scalar_text(r, &k, "a key", &key);
        const int64_t line = line_of(&k);
        yaml_event_delete(&k);
        if (!rc && !key[0]) rc = fail(r, line, "an empty key");
        const int seen = rc ? -1 : find_key(out, key);
        if (seen >= 0)
            rc = fail(r, line, "'%s' again (first on line %lld); each option is set once", key,
                      (long long)out->e[seen].line);
        yaml_event_t v;
        if (!rc) rc = next(r, &v);
        if (rc) {
            free(key);
            return rc;
        }
        char *value = NULL;
        rc = read_value(r, key, line, &v, &value);
        yaml_event_delete(&v);
        if (rc) {
            free(key);
            return rc;
        }
        push(out, line, key, value);
    }
}

// The stream: at most one document, holding a mapping (or nothing at all).
static int read_stream(reader_t *r, config_entries_t *out) {
    int documents = 0;
    for (;;) {
        yaml_event_t ev;
        int rc = next(r, &ev);
        if (rc) return rc;
        const yaml_event_type_t type = ev.type;
        const int64_t line = line_of(&ev);
        const int empty = type == YAML_SCALAR_EVENT && is_null(&ev);
        yaml_event_delete(&ev);
        switch (type) {
            case YAML_STREAM_END_EVENT:
                return 0;
            case YAML_STREAM_START_EVENT:
            case YAML_DOCUMENT_END_EVENT:
                break;
            case YAML_DOCUMENT_START_EVENT:
                if (documents++) return fail(r, line, "a second YAML document; a config file holds one mapping");
                break;
            case YAML_MAPPING_START_EVENT:
                if ((rc = read_mapping(r, out)) != 0) return rc;
                break;
            case YAML_SCALAR_EVENT:
                if (empty) break;  // "---" and nothing else
                /* fall through */
            default:
                return fail(r, line, "expected a mapping of option names to values (key: value lines)");
        }
    }
}

int config_yaml_parse(const char *text, size_t len, const char *path, config_entries_t *out, char *err, size_t cap) {
    memset(out, 0, sizeof *out);
    reader_t r = {.text = text, .len = len, .path = path, .err = err, .cap = cap};
    if (!yaml_parser_initialize(&r.parser)) spk_die(SPK_EXIT_FAILURE, "libyaml: cannot initialise a parser");
    yaml_parser_set_input_string(&r.parser, (const unsigned char *)text, len);
    const int rc = memchr(text, 0, len) ? fail(&r, line_at(&r, (size_t)((const char *)memchr(text, 0, len) - text)),
                                               "holds a NUL byte (not a text file)")
                                        : read_stream(&r, out);
    yaml_parser_delete(&r.parser);
    if (rc) config_entries_free(out);
    return rc;
}

int config_yaml_read_file(const char *path, char **text, size_t *len, char *err, size_t cap) {
    *text = NULL;
    *len = 0;
    struct stat st;
    // Opened without blocking: a FIFO or a device would wait for a writer forever.
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "rb");
    if (fd >= 0 && !f) close(fd);
    if (!f || fstat(fileno(f), &st) != 0) {
        snprintf(err, cap, "%s: cannot read the config file (%s)", path, strerror(errno));
        if (f) fclose(f);
        return SPK_EXIT_USAGE;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > CONFIG_YAML_MAX_BYTES) {
        snprintf(err, cap, "%s: %s", path,
                 S_ISREG(st.st_mode) ? "the config file is larger than 1 MiB"
                                     : "the config file is not a regular file (a FIFO, a device or a directory)");
        fclose(f);
        return SPK_EXIT_USAGE;
    }
    char *buf = mallocCheck((size_t)st.st_size + 1);
    const size_t n = fread(buf, 1, (size_t)st.st_size, f);
    const int bad = ferror(f) || n != (size_t)st.st_size;
    fclose(f);
    if (bad) {
        snprintf(err, cap, "%s: cannot read the config file", path);
        free(buf);
        return SPK_EXIT_USAGE;
    }
    buf[n] = 0;
    *text = buf;
    *len = n;
    return 0;
}

// ---- writing -------------------------------------------------------------------------------

static int emit(yaml_emitter_t *e, yaml_event_t *ev, int ok) { return ok && yaml_emitter_emit(e, ev); }

static int emit_scalar(yaml_emitter_t *e, const char *s, size_t n) {
    // Values the parser would read as null are quoted, so they come back as themselves.
    const int nullish = n == 0 || (n == 1 && s[0] == '~') ||
                        (n == 4 && (!strncmp(s, "null", 4) || !strncmp(s, "Null", 4) || !strncmp(s, "NULL", 4)));
    yaml_event_t ev;
    return emit(e, &ev,
                yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)n, 1, 1,
                                             nullish ? YAML_SINGLE_QUOTED_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE));
}

int config_yaml_write(FILE *f, const char *header, const char *kv_text) {
    if (header) {
        for (const char *p = header; *p;) {
            const size_t n = strcspn(p, "\n");
            fprintf(f, "# %.*s\n", (int)n, p);
            p += n + (p[n] == '\n');
        }
    }
    yaml_emitter_t e;
    yaml_event_t ev;
    if (!yaml_emitter_initialize(&e)) return -1;
    yaml_emitter_set_output_file(&e, f);
    yaml_emitter_set_unicode(&e, 1);
    yaml_emitter_set_width(&e, -1);  // one line per option, however long the path
    int ok = emit(&e, &ev, yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING));
    ok = emit(&e, &ev, ok && yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1));
    ok = emit(&e, &ev, ok && yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE));
    for (const char *p = kv_text; ok && *p;) {
        const size_t n = strcspn(p, "\n");
        const char *eq = memchr(p, '=', n);
        if (eq) ok = emit_scalar(&e, p, (size_t)(eq - p)) && emit_scalar(&e, eq + 1, n - (size_t)(eq - p) - 1);
        p += n + (p[n] == '\n');
    }
    ok = emit(&e, &ev, ok && yaml_mapping_end_event_initialize(&ev));
    ok = emit(&e, &ev, ok && yaml_document_end_event_initialize(&ev, 1));
    ok = emit(&e, &ev, ok && yaml_stream_end_event_initialize(&ev));
    ok = ok && yaml_emitter_flush(&e);
    yaml_emitter_delete(&e);
    return ok && !ferror(f) ? 0 : -1;
}

int config_yaml_save(const char *dir, const char *name, const char *yaml, char *err, size_t cap) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        snprintf(err, cap, "%s: cannot create the directory (%s)", dir, strerror(errno));
        return -1;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return atomic_write_file(path, yaml, strlen(yaml), ATOMIC_REPLACE, err, cap);
}
