// The augmentation flags: defaults, and the parsing of their list-valued strings.
#include "io/augment/augment_config.h"

#include "io/audio/audio.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

augment_config_t augment_config_defaults(void) {
    augment_config_t c;
    memset(&c, 0, sizeof c);
    c.prob = 1.0;
    c.reverb_prob = 0.5;
    c.noise_prob = 0.5;
    // Kaldi's and WeSpeaker's MUSAN settings: noise 0-15 dB, music 5-15 dB, babble of 3-7
    // speakers 13-20 dB.
    snprintf(c.noise_snr, sizeof c.noise_snr, "noise=0:15,music=5:15,speech=13:20");
    snprintf(c.babble, sizeof c.babble, "speech=3:7");
    c.time_width = 10;
    c.freq_width = 8;
    return c;
}

static int fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return -1;
}

// "LO:HI" or "V" (LO = HI = V) into lo <= hi; the whole text must be numbers.
static int parse_range(const char *text, double *lo, double *hi) {
    char *end;
    *lo = strtod(text, &end);
    if (end == text) return -1;
    *hi = *lo;
    if (*end == ':') {
        const char *p = end + 1;
        *hi = strtod(p, &end);
        if (end == p) return -1;
    }
    return *end == 0 && isfinite(*lo) && isfinite(*hi) && *lo <= *hi ? 0 : -1;
}

// "NAME=RANGE" into name (cap bytes) and its range.
static int parse_item(const char *item, char *name, size_t cap, double *lo, double *hi) {
    const char *eq = strchr(item, '=');
    if (!eq || eq == item || (size_t)(eq - item) >= cap) return -1;
    memcpy(name, item, (size_t)(eq - item));
    name[eq - item] = 0;
    return parse_range(eq + 1, lo, hi);
}

static int parse_noise(const char *text, augment_spec_t *s, char *err, size_t cap) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    s->num_kinds = 0;
    for (char *save = NULL, *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
        if (s->num_kinds == AUGMENT_MAX_KINDS)
            return fail(err, cap, "--noise-snr lists more than %d categories", AUGMENT_MAX_KINDS);
        augment_noise_kind_t *k = &s->kind[s->num_kinds];
        if (parse_item(it, k->category, sizeof k->category, &k->snr_lo, &k->snr_hi) != 0 || k->snr_lo < -30 ||
            k->snr_hi > 100)
            return fail(err, cap,
                        "--noise-snr item '%s' is not CATEGORY=LO:HI (SNR in dB, -30 <= LO <= HI <= 100), e.g. "
                        "noise=0:15",
                        it);
        for (int j = 0; j < s->num_kinds; j++)
            if (strcmp(s->kind[j].category, k->category) == 0)
                return fail(err, cap, "--noise-snr names category '%s' twice", k->category);
        s->num_kinds++;
    }
    return 0;
}

static int parse_babble(const char *text, augment_spec_t *s, char *err, size_t cap) {
    s->babble = -1;
    if (!text[0]) return 0;
    char name[64];
    double lo, hi;
    if (parse_item(text, name, sizeof name, &lo, &hi) != 0 || lo < 1 || hi > AUGMENT_MAX_SOURCES || lo != floor(lo) ||
        hi != floor(hi))
        return fail(err, cap,
                    "--babble '%s' is not CATEGORY=MIN:MAX with 1 <= MIN <= MAX <= %d entries, e.g. speech=3:7", text,
                    AUGMENT_MAX_SOURCES);
    for (int j = 0; j < s->num_kinds; j++)
        if (strcmp(s->kind[j].category, name) == 0) s->babble = j;
    if (s->babble < 0)
        return fail(err, cap,
                    "--babble names category '%s', which --noise-snr does not list (its SNR range comes from there)",
                    name);
    s->babble_lo = (int)lo;
    s->babble_hi = (int)hi;
    return 0;
}

static int parse_speed(const char *text, augment_spec_t *s, char *err, size_t cap) {
    char buf[64];
    snprintf(buf, sizeof buf, "%s", text);
    s->num_speeds = 0;
    for (char *save = NULL, *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
        char *end;
        double f = strtod(it, &end);
        if (end == it || *end || !(f >= 0.5 && f <= 2.0))
            return fail(err, cap, "--speed-perturb factor '%s' is not a number in [0.5, 2]", it);
        if (s->num_speeds == AUGMENT_MAX_SPEEDS)
            return fail(err, cap, "--speed-perturb lists more than %d factors", AUGMENT_MAX_SPEEDS);
        for (int j = 0; j < s->num_speeds; j++)
            if (fabs(s->speed[j] - f) < 1e-4) return fail(err, cap, "--speed-perturb lists factor %g twice", f);
        s->speed[s->num_speeds++] = f;
    }
    for (int j = 0; j < s->num_speeds; j++)
        if (fabs(s->speed[j] - 1.0) > 1e-4 && !audio_can_decode())
            return fail(err, cap, "--speed-perturb %g resamples the audio, but " AUDIO_NO_DECODING, s->speed[j]);
    return 0;
}

int augment_parse(const augment_config_t *c, augment_spec_t *s, char *err, size_t cap) {
    memset(s, 0, sizeof *s);
    if (parse_noise(c->noise_snr, s, err, cap) || parse_babble(c->babble, s, err, cap) ||
        parse_speed(c->speed, s, err, cap))
        return -1;
    if (c->noise_bank[0] && s->num_kinds == 0)
        return fail(err, cap, "--noise-bank needs at least one category in --noise-snr");
    if ((c->time_masks > 0 && c->time_width < 1) || (c->freq_masks > 0 && c->freq_width < 1))
        return fail(err, cap, "SpecAugment masks need --spec-time-width / --spec-freq-width of at least 1");
    return 0;
}

int augment_classes_per_speaker(const augment_config_t *c) {
    augment_spec_t s;
    char err[256];
    if (augment_parse(c, &s, err, sizeof err) != 0) return 1;  // the flags are checked where they are parsed
    return s.num_speeds > 0 ? s.num_speeds : 1;
}
