// A face stream beside an audio encoder's pooled statistics (resnet34-av, campplus-av): the face
// encoder (app/model/layers/face_encoder.h) on a /visual stream of pictures, the mean and standard
// deviation over time of its values (2 Dv a sample), joined after the audio's statistics into
// the input of the model's embedding layer; modality dropout (model_t.modality) zeroes a sample's
// statistics of the stream it goes without, and their gradients.
#pragma once
#include "app/model/core/model_config.h"
#include "app/model/core/model_core.h"
#include "app/model/layers/face_encoder.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    face_encoder_t face;
    int64_t vratio;           // audio frames per visual frame
    int64_t vdim;             // Dv: the face encoder's values a frame
    int64_t audio_dim;        // the audio's statistics a sample
    int64_t joined_dim;       // audio_dim + 2 Dv: the embedding layer's input
    const float *pictures;    // the forward's (B, Tv, S, S, C), kept for the backward
    float *fx, *g_fx;         // (B Tv, Dv)
    float *vpool, *g_vpool;   // (B, 2 Dv)
    float *joined, *g_audio;  // (B, joined_dim), (B, audio_dim)
    int cap_b, cap_frames;
} face_branch_t;

// Checks what the model was given (--face-channels, a stream of square pictures) and sets the
// branch up beside audio_dim values of audio statistics; one line naming the dataset otherwise.
void face_branch_setup(face_branch_t *fb, const model_t *m, const model_config_t *cfg, const model_data_t *data,
                       int64_t audio_dim);
// Registers the face encoder ("visual.face"): call right after the embedding layer's tensors.
void face_branch_register(face_branch_t *fb, model_t *m);
// Room for B samples of T audio frames (embed takes a long utterance's pictures in pieces).
void face_branch_reserve(face_branch_t *fb, const model_t *m, int B, int T);
size_t face_branch_work_floats(const face_branch_t *fb);
void face_branch_release(face_branch_t *fb, const model_t *m);
// The embedding layer's input (B, joined_dim): the audio's statistics (B, audio_dim), then the
// face's.
const float *face_branch_forward(face_branch_t *fb, model_t *m, const float *audio, const float *pictures, int B, int T,
                                 int train, float *work);
// From the gradient of that input (g_joined, clobbered): the face encoder's parameter gradients
// (reported ready), and the audio statistics' gradient, returned (B, audio_dim).
const float *face_branch_backward(face_branch_t *fb, model_t *m, float *g_joined, int B, int T, float *work);
