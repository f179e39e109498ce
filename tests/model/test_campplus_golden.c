// CAM++ against 3D-Speaker's own class (tests/golden/campplus_golden.h5, made by
// make_campplus_golden.py in float64 with speakerlab's CAMPPlus: two CAM segments, the second a
// short one): eval-mode embeddings, training-mode embeddings, AAM loss, every parameter
// gradient, the input gradient and the BatchNorm running statistics after the step, each within
// a normwise relative error of 5e-5. argv[2]: 1 to recompute the dense layers' inputs in the
// backward (the same figures). argv[3]: the 2-D convolution algorithm (--conv-algorithm; default
// auto, Winograd for the front end's 3x3 layers of 16 channels and more).
//
// Each tensor is held to 5e-2 under the direct convolution (PyTorch's own float32 step: 1.9e-2 at
// worst, 0.82e-2 all together) and to 1e-1 under Winograd, whose own rounding flips other ReLUs:
// its worst tensor lands 6.0e-2 away (a CAM mask's bias, whose gradient is a sum that mostly
// cancels), all of them together 1.16e-2, within the twice-PyTorch bound the golden file gives.
#include "app/model/campplus/campplus.h"
#include "tests/model/golden_util.h"

#define TOL                 5e-5
#define TENSOR_TOL          5e-2
#define TENSOR_TOL_WINOGRAD 1e-1

static int recompute;
static const char *algorithm = "auto";

static model_t *make(hid_t f) {
    int64_t F, C, E, S, growth, bn_size;
    double margin, scale;
    h5_attr_read_i64(f, "F", &F);
    h5_attr_read_i64(f, "C", &C);
    h5_attr_read_i64(f, "growth_rate", &growth);
    h5_attr_read_i64(f, "bn_size", &bn_size);
    h5_attr_read_i64(f, "emb_dim", &E);
    h5_attr_read_i64(f, "num_speakers", &S);
    h5_attr_read_f64(f, "margin", &margin);
    h5_attr_read_f64(f, "scale", &scale);
    model_config_t mc = model_config_defaults("campplus");
    mc.channels = C, mc.emb_dim = E, mc.growth_rate = growth, mc.bn_size = bn_size, mc.recompute = recompute;
    snprintf(mc.conv_algorithm, sizeof mc.conv_algorithm, "%s", algorithm);
    mc.margin = margin, mc.scale = scale;
    return model_create(&mc, &(model_data_t){.feature_dim = F, .num_classes = S}, &spk_backend_cpu);
}

static const float *forward(model_t *m, const float *x, int B, int T, int train) {
    return campplus_forward(m->impl, m, x, B, T, train);
}

static void backward(model_t *m, const float *g_emb, float *dframes, int B, int T) {
    campplus_backward(m->impl, m, g_emb, dframes, B, T);
}

int main(int argc, char **argv) {
    recompute = argc > 2 && atoi(argv[2]);
    if (argc > 3) algorithm = argv[3];
    const double tensor_tol = strcmp(algorithm, "direct") == 0 ? TENSOR_TOL : TENSOR_TOL_WINOGRAD;
    return golden_run(argc > 1 ? argv[1] : "campplus_golden.h5", "test_campplus_golden", make,
                      (golden_encoder_t){forward, backward, NULL, tensor_tol}, TOL);
}
