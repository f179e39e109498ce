#include "app/eval/det_plot.h"

#include "io/common/atomic_file.h"
#include "kernels/base/child_process.h"
#include "kernels/base/stop_signals.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void det_table_path(const char *png, char *out, size_t cap) {
    const size_t n = strlen(png);
    if (n > 4 && strcmp(png + n - 4, ".png") == 0)
        snprintf(out, cap, "%.*s.txt", (int)(n - 4), png);
    else
        snprintf(out, cap, "%s.txt", png);
}

// A point strictly inside a horizontal or vertical run of the staircase adds nothing.
static int corner(const det_series_t *s, int64_t k) {
    if (k == 0 || k == s->points - 1) return 1;
    const int flat_m = s->pm[k - 1] == s->pm[k] && s->pm[k] == s->pm[k + 1];
    const int flat_f = s->pf[k - 1] == s->pf[k] && s->pf[k] == s->pf[k + 1];
    return !flat_m && !flat_f;
}

static int write_table(const char *path, const det_series_t *series, int n, char *err, size_t cap) {
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, cap, "%s: cannot write the DET table (%s)", path, strerror(errno));
        return -1;
    }
    fprintf(f, "# DET curves: false-alarm and miss probabilities at every corner, one block per curve\n");
    for (int i = 0; i < n; i++) {
        const det_series_t *s = &series[i];
        fprintf(f, "%s# %s\n# pfa pmiss\n", i ? "\n\n" : "", s->name);
        for (int64_t k = 0; k < s->points; k++)
            if (corner(s, k)) fprintf(f, "%.9g %.9g\n", s->pf[k], s->pm[k]);
    }
    if (ferror(f) | (fclose(f) != 0)) {
        snprintf(err, cap, "%s: cannot write the DET table (%s)", path, strerror(errno));
        return -1;
    }
    return 0;
}

// A gnuplot single-quoted string: quotes doubled.
static void gp_string(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputc('\'', f);
        fputc(*s, f);
    }
    fputc('\'', f);
}

static void write_script(FILE *g, const char *out, const char *table, const char *title, const det_series_t *series,
                         int n) {
    fprintf(g, "set terminal pngcairo size 760,760 noenhanced\nset output ");
    gp_string(g, out);
    fprintf(g, "\nset title ");
    gp_string(g, title);
    // Probabilities become normal deviates; 0 and 1 are moved just outside the axes.
    fprintf(g,
            "\np(x) = invnorm(x < 1e-7 ? 1e-7 : x > 1 - 1e-7 ? 1 - 1e-7 : x)\n"
            "set xrange [p(0.0001):p(0.6)]\nset yrange [p(0.0001):p(0.6)]\n"
            "set xtics ('0.01' p(0.0001), '0.1' p(0.001), '0.5' p(0.005), '1' p(0.01), '2' p(0.02), '5' p(0.05), "
            "'10' p(0.1), '20' p(0.2), '40' p(0.4))\n"
            "set ytics ('0.01' p(0.0001), '0.1' p(0.001), '0.5' p(0.005), '1' p(0.01), '2' p(0.02), '5' p(0.05), "
            "'10' p(0.1), '20' p(0.2), '40' p(0.4))\n"
            "set xlabel 'false-alarm probability (%%)'\nset ylabel 'miss probability (%%)'\n"
            "set grid\nset size square\nset key top right\nset samples 2\nplot ");
    for (int i = 0; i < n; i++) {
        gp_string(g, table);
        fprintf(g, " index %d using (p($1)):(p($2)) with lines lw 2 title ", i);
        gp_string(g, series[i].name);
        fprintf(g, ", ");
    }
    fprintf(g, "x with lines dt 2 lc 'gray' title 'EER'\n");
}

// Both temp files are renamed into place once gnuplot has drawn; on failure both go.
int det_plot(const char *png, const char *title, const det_series_t *series, int n, char *err, size_t cap) {
    char table[4200], table_tmp[4300], png_tmp[4300];
    det_table_path(png, table, sizeof table);
    atomic_temp_path(table, table_tmp, sizeof table_tmp);
    atomic_temp_path(png, png_tmp, sizeof png_tmp);
    stop_signals_own_temp(table_tmp);
    stop_signals_own_temp(png_tmp);
    int rc = write_table(table_tmp, series, n, err, cap);
    child_t c;
    char why[256];
    FILE *g = NULL;
    if (!rc && child_start(&c, "exec gnuplot", 'w', why, sizeof why) != 0) {
        snprintf(err, cap, "%s: cannot start gnuplot (%s)", png, why);
        rc = -1;
    } else if (!rc && !(g = fdopen(c.fd, "w"))) {
        snprintf(err, cap, "%s: cannot write to gnuplot (%s)", png, strerror(errno));
        int code;
        child_finish(&c, 5.0, &code, why, sizeof why);
        rc = -1;
    }
    if (!rc) {
        write_script(g, png_tmp, table_tmp, title, series, n);
        fclose(g);
        c.fd = -1;  // closed with g
        int code;
        if (child_finish(&c, 120.0, &code, why, sizeof why) != 0) {
            if (code == 127)
                snprintf(err, cap, "%s: gnuplot is not installed (Debian: apt-get install gnuplot-nox)", png);
            else
                snprintf(err, cap, "%s: gnuplot failed (%s; its messages are above)", png, why);
            rc = -1;
        }
    }
    if (!rc && (rename(table_tmp, table) != 0 || rename(png_tmp, png) != 0)) {
        snprintf(err, cap, "%s: cannot move the plot or its table into place (%s)", png, strerror(errno));
        unlink(table);
        rc = -1;
    }
    if (rc) {
        unlink(table_tmp);
        unlink(png_tmp);
    }
    stop_signals_disown_temp(table_tmp);
    stop_signals_disown_temp(png_tmp);
    return rc;
}
