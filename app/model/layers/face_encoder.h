// The face encoder of the audio-visual models: a ResNet18-class 2-D CNN over each visual frame (a
// square picture, channels-last (S, S, C) as the dataset's JPEG frames decode), pooled over the
// picture's positions into one vector per frame, which the model's temporal layers then take
// (app/model/ecapa/ecapa.h: ecapa-av with --face-channels). Layout: a 3x3 stride-2 stem of width w,
// then ResNet18's four stages of two BasicBlocks (w, 2w, 4w, 8w planes; stride 1, 2, 2, 2), and
// the mean and standard deviation of the last map over its positions (2 x 8w values a frame). The
// BatchNorms normalise over every frame of the batch. Parameters are named as PyTorch's:
// <prefix>.conv1, <prefix>.bn1, <prefix>.layer1.0.conv1, ...
#pragma once
#include "app/model/core/model_core.h"
#include "app/model/layers/conv2d_bn.h"
#include "app/model/layers/res_block.h"

#include <stddef.h>
#include <stdint.h>

#define FACE_STAGES         4
#define FACE_BLOCKS         2   // BasicBlocks a stage (ResNet18)
#define FACE_MIN_SIZE       17  // the last map must keep two positions for the deviation
#define FACE_POOL_EPS       1e-7f
#define FACE_EMBED_PICTURES 256  // inference takes a long utterance's pictures this many at a time

typedef struct {
    int size, cin, width;  // S, C of the pictures; w
    conv2d_bn_t stem;
    res_block_t block[FACE_STAGES * FACE_BLOCKS];
    conv2d_bn_t *units[1 + 3 * FACE_STAGES * FACE_BLOCKS];
    int nunits;
    int out_side, out_c;  // the last map at the current shape (out_side x out_side x out_c)
    float *g[4];          // (map_floats,) gradient maps
    size_t map_floats, work;
    int cap_n;  // pictures the activations hold
} face_encoder_t;

// The pictures' side S and channels C from a stream's values per frame: S^2 (gray) or 3 S^2 (RGB),
// which no S makes ambiguous (3 is not a square). Returns 0, or -1 when neither fits or S is
// below FACE_MIN_SIZE.
int face_encoder_picture_shape(int64_t values, int *size, int *channels);
// Registers the encoder for S x S pictures of C channels (reverse execution order: the last
// block first, the stem last).
void face_encoder_register(face_encoder_t *f, model_t *m, const char *prefix, int size, int cin, int width);
// Values per frame: 2 x 8w.
static inline int64_t face_encoder_dim(const face_encoder_t *f) { return 2 * 8 * (int64_t)f->width; }
// Makes room for n pictures (grows, never shrinks); the work scratch its forward and backward
// need is face_encoder_work_floats afterwards.
void face_encoder_reserve(face_encoder_t *f, const model_t *m, int n);
size_t face_encoder_work_floats(const face_encoder_t *f);
void face_encoder_release(face_encoder_t *f, const model_t *m);
// out (B x Tv, 2 x 8w) from the pictures (B x Tv, S, S, C) of B samples of Tv frames; train: batch
// statistics over the B samples' frames (updating the running ones), all pictures at once;
// inference (the running statistics: each picture on its own) takes them as many at a time as
// the encoder was reserved for.
void face_encoder_forward(face_encoder_t *f, model_t *m, const float *pictures, float *out, int B, int Tv, int train,
                          float *work);
// The parameter gradients (accumulated) from g_out (B x Tv, 2 x 8w) and the forward's out.
void face_encoder_backward(face_encoder_t *f, model_t *m, const float *g_out, const float *pictures, const float *out,
                           int B, int Tv, float *work);
// The offset just past the encoder's parameters (its gradients are final once its backward ran).
int64_t face_encoder_end(const face_encoder_t *f);
// --zero-init-residual on the encoder's blocks (res_blocks_zero_residual).
static inline void face_encoder_zero_residual(const face_encoder_t *f, model_t *m) {
    res_blocks_zero_residual(f->block, FACE_STAGES * FACE_BLOCKS, m);
}
