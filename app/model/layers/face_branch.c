// The face stream beside an audio encoder (app/model/layers/face_branch.h).
#include "app/model/layers/face_branch.h"

#include "kernels/base/check.h"

#define FACE_BRANCH_EPS 1e-7f  // sqrt(var + eps) of the values over time, as the audio's TSTP

void face_branch_setup(face_branch_t *fb, const model_t *m, const model_config_t *cfg, const model_data_t *data,
                       int64_t audio_dim) {
    const char *src = data->source ? data->source : "the dataset";
    if (m->visual_dim <= 0 || cfg->face_channels <= 0 || data->visual_kind == VISUAL_FEATURES)
        spk_fail_all(SPK_EXIT_USAGE,
                     "%s: --model %s takes a /visual stream of pictures (prepare --video-scp) through its face encoder "
                     "(--face-channels W, e.g. 32)",
                     src, cfg->name);
    int size, channels;
    if (face_encoder_picture_shape(m->visual_dim, &size, &channels) != 0)
        spk_fail_all(SPK_EXIT_DATA,
                     "%s: --model %s needs square pictures of at least %d pixels; this stream has %lld values a frame",
                     src, cfg->name, FACE_MIN_SIZE, (long long)m->visual_dim);
    *fb = (face_branch_t){.face = {.size = size, .cin = channels, .width = (int)cfg->face_channels},
                          .vratio = m->visual_ratio,
                          .audio_dim = audio_dim};
    fb->vdim = face_encoder_dim(&fb->face);
    fb->joined_dim = audio_dim + 2 * fb->vdim;
}

void face_branch_register(face_branch_t *fb, model_t *m) {
    face_encoder_register(&fb->face, m, "visual.face", fb->face.size, fb->face.cin, fb->face.width);
}

static void free_buffers(face_branch_t *fb, const model_t *m) {
    float **const bufs[] = {&fb->fx, &fb->g_fx, &fb->vpool, &fb->g_vpool, &fb->joined, &fb->g_audio};
    model_bufs_free(m, bufs, sizeof bufs / sizeof bufs[0]);
}

void face_branch_reserve(face_branch_t *fb, const model_t *m, int B, int T) {
    const int n = B * (T / (int)fb->vratio);
    face_encoder_reserve(&fb->face, m, m->embedding && n > FACE_EMBED_PICTURES ? FACE_EMBED_PICTURES : n);
    if (B <= fb->cap_b && n <= fb->cap_frames) return;
    const int cb = B > fb->cap_b ? B : fb->cap_b, cf = n > fb->cap_frames ? n : fb->cap_frames;
    free_buffers(fb, m);
    const size_t Dv = (size_t)fb->vdim;
    fb->fx = model_buf(m, (size_t)cf * Dv);
    fb->g_fx = model_buf(m, (size_t)cf * Dv);
    fb->vpool = model_buf(m, (size_t)cb * 2 * Dv);
    fb->g_vpool = model_buf(m, (size_t)cb * 2 * Dv);
    fb->joined = model_buf(m, (size_t)cb * (size_t)fb->joined_dim);
    fb->g_audio = model_buf(m, (size_t)cb * (size_t)fb->audio_dim);
    fb->cap_b = cb, fb->cap_frames = cf;
}

size_t face_branch_work_floats(const face_branch_t *fb) { return face_encoder_work_floats(&fb->face); }

void face_branch_release(face_branch_t *fb, const model_t *m) {
    face_encoder_release(&fb->face, m);
    free_buffers(fb, m);
    fb->cap_b = fb->cap_frames = 0;
}

// A sample's statistics of the stream it goes without, zeroed in its row of (joined_dim,).
static void zero_stream(const face_branch_t *fb, const model_t *m, float *row, int modality) {
    if (modality == MODALITY_AUDIO) m->be->vec_zero(row + fb->audio_dim, (size_t)(2 * fb->vdim));
    if (modality == MODALITY_VISUAL) m->be->vec_zero(row, (size_t)fb->audio_dim);
}

const float *face_branch_forward(face_branch_t *fb, model_t *m, const float *audio, const float *pictures, int B, int T,
                                 int train, float *work) {
    const spk_backend_t *K = m->be;
    const int Tv = T / (int)fb->vratio, Pa = (int)fb->audio_dim, Dv = (int)fb->vdim, P = (int)fb->joined_dim;
    fb->pictures = pictures;
    face_encoder_forward(&fb->face, m, pictures, fb->fx, B, Tv, train, work);
    K->tstp_forward(fb->vpool, fb->fx, B, 1, Tv, Dv, FACE_BRANCH_EPS);  // (B, Tv, Dv): one row of Tv frames
    K->channel_slice_copy(fb->joined, P, audio, Pa, B, Pa, 1);
    K->channel_slice_copy(fb->joined + Pa, P, fb->vpool, 2 * Dv, B, 2 * Dv, 1);
    for (int b = 0; m->modality && b < B; b++) zero_stream(fb, m, fb->joined + (size_t)b * P, m->modality[b]);
    return fb->joined;
}

const float *face_branch_backward(face_branch_t *fb, model_t *m, float *g_joined, int B, int T, float *work) {
    const spk_backend_t *K = m->be;
    const int Tv = T / (int)fb->vratio, Pa = (int)fb->audio_dim, Dv = (int)fb->vdim, P = (int)fb->joined_dim;
    for (int b = 0; m->modality && b < B; b++) zero_stream(fb, m, g_joined + (size_t)b * P, m->modality[b]);
    K->channel_slice_copy(fb->g_audio, Pa, g_joined, P, B, Pa, 1);
    K->channel_slice_copy(fb->g_vpool, 2 * Dv, g_joined + Pa, P, B, 2 * Dv, 1);
    K->vec_zero(fb->g_fx, (size_t)B * Tv * Dv);
    K->tstp_backward(fb->g_fx, fb->g_vpool, fb->fx, fb->vpool, B, 1, Tv, Dv);
    face_encoder_backward(&fb->face, m, fb->g_fx, fb->pictures, fb->fx, B, Tv, work);
    model_grads_ready(m, face_encoder_end(&fb->face));
    return fb->g_audio;
}
