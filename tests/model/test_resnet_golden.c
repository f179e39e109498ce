// WeSpeaker's ResNets against PyTorch (tests/golden/resnet18_golden.h5 and resnet50_golden.h5,
// made by make_resnet_golden.py in float64: BasicBlocks and Bottlenecks): eval-mode embeddings,
// training-mode embeddings, AAM loss, every parameter gradient, the input gradient and the
// BatchNorm running statistics after the step, each within a normwise relative error of 5e-5
// (argv[2] to change it: the tiny Bottleneck network is ill-conditioned in float32, PyTorch's own
// float32 step differs from its float64 reference by up to 6.0e-4 there, so its test allows 1.5e-3).
// argv[3]: the 2-D convolution algorithm (--conv-algorithm; default auto, Winograd for the
// layers of 16 channels and more, which the small networks here have too).
#include "app/model/resnet/resnet.h"
#include "tests/model/golden_util.h"

#define TOL 5e-5

static const char *algorithm = "auto";

static model_t *make(hid_t f) {
    int64_t F, C, E, S;
    double margin, scale;
    char model[32];
    h5_attr_read_i64(f, "F", &F);
    h5_attr_read_i64(f, "C", &C);
    h5_attr_read_i64(f, "emb_dim", &E);
    h5_attr_read_i64(f, "num_speakers", &S);
    h5_attr_read_f64(f, "margin", &margin);
    h5_attr_read_f64(f, "scale", &scale);
    h5_attr_read_str(f, "model", model, sizeof model);
    model_config_t mc = model_config_defaults(model);
    mc.channels = C, mc.emb_dim = E, mc.margin = margin, mc.scale = scale;
    snprintf(mc.conv_algorithm, sizeof mc.conv_algorithm, "%s", algorithm);
    return model_create(&mc, &(model_data_t){.feature_dim = F, .num_classes = S}, &spk_backend_cpu);
}

static const float *forward(model_t *m, const float *x, int B, int T, int train) {
    return resnet_forward(m->impl, m, x, B, T, train);
}

static void backward(model_t *m, const float *g_emb, float *dframes, int B, int T) {
    resnet_backward(m->impl, m, g_emb, dframes, B, T);
}

int main(int argc, char **argv) {
    if (argc > 3) algorithm = argv[3];
    return golden_run(argc > 1 ? argv[1] : "resnet18_golden.h5", "test_resnet_golden", make,
                      (golden_encoder_t){forward, backward, NULL, 0}, argc > 2 ? atof(argv[2]) : TOL);
}
