// The table of the model zoo (app/model/registry.h). One row per --model name; a family's
// folder provides what its rows name.
#include "app/model/registry.h"

#include "app/model/campplus/campplus.h"
#include "app/model/campplus/campplus_export.h"
#include "app/model/ecapa/ecapa.h"
#include "app/model/ecapa/ecapa_export.h"
#include "app/model/linear/linear.h"
#include "app/model/resnet/resnet.h"
#include "app/model/resnet/resnet_export.h"

#include <stdio.h>
#include <string.h>

// WeSpeaker's ResNets, one row per depth (app/model/resnet/resnet.c knows their blocks).
#define RESNET_ROW(depth, class)                                                                          \
    {                                                                                                     \
        .name = depth, .build = model_resnet_build, .frames = RESNET_FRAMES, .channels = RESNET_CHANNELS, \
        .emb_dim = RESNET_EMB, .forward_flop = resnet_forward_flop, .toolkit = "WeSpeaker",               \
        .toolkit_model = "wespeaker.models.resnet." class, .toolkit_args = resnet_wespeaker_args,         \
        .onnx_write = resnet_onnx_write                                                                   \
    }

static const model_family_t families[] = {
    {.name = "linear", .build = model_linear_build, .frames = 0},
    {.name = "ecapa",
     .build = model_ecapa_build,
     .frames = ECAPA_FRAMES,
     .channels = ECAPA_CHANNELS,
     .emb_dim = ECAPA_EMB,
     .toolkit = "SpeechBrain",
     .forward_flop = ecapa_forward_flop,
     .speechbrain_encoder = "speechbrain.lobes.models.ECAPA_TDNN.ECAPA_TDNN",
     .speechbrain_classifier = "speechbrain.lobes.models.ECAPA_TDNN.Classifier",
     .speechbrain_args = ecapa_speechbrain_args,
     .onnx_write = ecapa_onnx_write},
    {.name = "ecapa-av",
     .build = model_ecapa_build,
     .visual = 1,
     .frames = ECAPA_FRAMES,
     .channels = ECAPA_CHANNELS,
     .emb_dim = ECAPA_EMB},
    RESNET_ROW("resnet18", "ResNet18"),
    RESNET_ROW("resnet34", "ResNet34"),
    RESNET_ROW("resnet50", "ResNet50"),
    RESNET_ROW("resnet101", "ResNet101"),
    RESNET_ROW("resnet152", "ResNet152"),
    RESNET_ROW("resnet221", "ResNet221"),
    RESNET_ROW("resnet293", "ResNet293"),
    {.name = "resnet34-av",  // spkddp's: WeSpeaker's ResNet34 beside a face encoder (app/model/resnet/resnet.h)
     .build = model_resnet_build,
     .visual = 1,
     .frames = RESNET_FRAMES,
     .channels = RESNET_CHANNELS,
     .emb_dim = RESNET_EMB},
    {.name = "campplus",
     .build = model_campplus_build,
     .frames = CAMPP_FRAMES,
     .channels = CAMPP_CHANNELS,
     .emb_dim = CAMPP_EMB,
     .forward_flop = campplus_forward_flop,
     .toolkit = "3D-Speaker",
     .toolkit_model = "speakerlab.models.campplus.DTDNN.CAMPPlus",
     .toolkit_args = campplus_speakerlab_args,
     .onnx_write = campplus_onnx_write},
    {.name = "campplus-av",  // spkddp's: 3D-Speaker's CAM++ beside a face encoder (app/model/campplus/campplus.h)
     .build = model_campplus_build,
     .visual = 1,
     .frames = CAMPP_FRAMES,
     .channels = CAMPP_CHANNELS,
     .emb_dim = CAMPP_EMB},
};
#define NFAMILIES (int)(sizeof families / sizeof families[0])

const model_family_t *model_family_find(const char *name) {
    for (int i = 0; i < NFAMILIES; i++)
        if (strcmp(families[i].name, name) == 0) return &families[i];
    return NULL;
}

model_config_t model_config_resolve(const model_config_t *cfg) {
    model_config_t c = *cfg;
    const model_family_t *f = model_family_find(cfg->name);
    if (f && c.channels == 0) c.channels = f->channels;
    if (f && c.emb_dim == 0) c.emb_dim = f->emb_dim;
    return c;
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
