// ECAPA-TDNN against PyTorch (tests/golden/ecapa_golden.h5, made by make_ecapa_golden.py in
// float64): eval-mode embeddings, training-mode embeddings, AAM loss, every parameter
// gradient, the input gradient, and the BatchNorm running statistics after the step.
// Tolerance: normwise relative error ||ours - ref|| / ||ref|| <= 5e-5 per tensor (measured
// worst: 1.3e-5). Our path is float32 end to end (sums over up to 9C*K terms, a softmax over time and an AAM head with
// scale 30 amplify rounding), measured errors are reported so regressions show.
#include "app/model/ecapa/ecapa.h"
#include "tests/model/golden_util.h"

#define TOL 5e-5

static model_t *make(hid_t f) {
    int64_t F, C, A, SE, E, S;
    double margin, scale;
    h5_attr_read_i64(f, "F", &F);
    h5_attr_read_i64(f, "C", &C);
    h5_attr_read_i64(f, "attention_channels", &A);
    h5_attr_read_i64(f, "se_channels", &SE);
    h5_attr_read_i64(f, "emb_dim", &E);
    h5_attr_read_i64(f, "num_speakers", &S);
    h5_attr_read_f64(f, "margin", &margin);
    h5_attr_read_f64(f, "scale", &scale);
    model_config_t mc = model_config_defaults("ecapa");
    mc.channels = C, mc.att_channels = A, mc.se_channels = SE, mc.emb_dim = E;
    mc.margin = margin, mc.scale = scale;
    return model_create(&mc, &(model_data_t){.feature_dim = F, .num_classes = S}, &spk_backend_cpu);
}

static const float *forward(model_t *m, const float *x, int B, int T, int train) {
    ecapa_t *e = m->impl;
    ecapa_forward(e, m, x, NULL, B, T, train);
    return e->emb;
}

static void backward(model_t *m, const float *g_emb, float *dframes, int B, int T) {
    ecapa_backward(m->impl, m, g_emb, dframes, B, T);
}

int main(int argc, char **argv) {
    // The attention logits' bias: a softmax over time is invariant to a per-channel shift.
    return golden_run(argc > 1 ? argv[1] : "ecapa_golden.h5", "test_ecapa_golden", make,
                      (golden_encoder_t){forward, backward, "asp.conv.conv.bias", 0}, TOL);
}
