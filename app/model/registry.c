// The table of the model zoo (app/model/registry.h). One row per --model name; a family's
// folder provides what its rows name.
#include "app/model/registry.h"

#include "app/model/ecapa/ecapa.h"
#include "app/model/ecapa/ecapa_export.h"
#include "app/model/linear/linear.h"

#include <stdio.h>
#include <string.h>

static const model_family_t families[] = {
    {.name = "linear", .build = model_linear_build, .frames = 0},
    {.name = "ecapa",
     .build = model_ecapa_build,
     .frames = ECAPA_FRAMES,
     .forward_flop = ecapa_forward_flop,
     .speechbrain_encoder = "speechbrain.lobes.models.ECAPA_TDNN.ECAPA_TDNN",
     .speechbrain_classifier = "speechbrain.lobes.models.ECAPA_TDNN.Classifier",
     .speechbrain_args = ecapa_speechbrain_args,
     .onnx_write = ecapa_onnx_write},
    {.name = "ecapa-av", .build = model_ecapa_build, .visual = 1, .frames = ECAPA_FRAMES},
};
#define NFAMILIES (int)(sizeof families / sizeof families[0])

const model_family_t *model_family_find(const char *name) {
    for (int i = 0; i < NFAMILIES; i++)
        if (strcmp(families[i].name, name) == 0) return &families[i];
    return NULL;
}

const model_family_t *model_family_of(const model_t *m) { return model_family_find(m->name); }

// The names of the rows that `keep` accepts, joined by sep, into out.
static const char *names(char *out, size_t cap, const char *sep, int (*keep)(const model_family_t *)) {
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < NFAMILIES; i++) {
        if (!keep(&families[i])) continue;
        len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s%s", len ? sep : "", families[i].name);
    }
    return out;
}

static int any(const model_family_t *f) { return (void)f, 1; }
static int audio_only(const model_family_t *f) { return !f->visual; }
static int with_onnx(const model_family_t *f) { return f->onnx_write != NULL; }

const char *model_family_choices(void) {
    static char s[256];
    return s[0] ? s : names(s, sizeof s, "|", any);
}

const char *model_family_choices_audio(void) {
    static char s[256];
    return s[0] ? s : names(s, sizeof s, "|", audio_only);
}

const char *model_family_onnx_names(void) {
    static char s[256];
    return s[0] ? s : names(s, sizeof s, ", ", with_onnx);
}
