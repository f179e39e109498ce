// The rows of flags that several commands share: one meaning, range and help text wherever
// they appear (T is the command's options struct, field the member the flag sets).
#pragma once
#include "app/cli/options.h"
#include "app/dist/device_select.h"
#include "app/model/registry.h"

// app/dist/device_select.h gives it its meaning; the default is device_default().
#define OPT_DEVICE(T, field)                                                                           \
    OPT_CHOICE(T, field, "device", DEVICE_CHOICES,                                                     \
               "where to compute (auto: a GPU when every rank has one, else the CPU; cpu-staged: the " \
               "GPU code path on the CPU, for tests; default $SPKDDP_DEVICE or auto)")
#define OPT_TF32(T, field) OPT_SWITCH(T, field, "tf32", "the same as --precision tf32 (kept for older command lines)")
#define OPT_PRECISION(T, field)                                                                                       \
    OPT_CHOICE(T, field, "precision", "fp32|tf32|bf16",                                                               \
               "math of the convolutions and GEMMs: fp32 (default); tf32: CUDA TF32 tensor cores (inputs rounded to " \
               "a 10-bit mantissa; fp32 on CPUs); bf16: bf16 operands, fp32 accumulation, weights, optimizer, "       \
               "BatchNorm and loss (ECAPA models; native on AVX512-BF16/AMX CPUs and tensor-core GPUs)")
#define OPT_CONV_ALGORITHM(T, field)                                                                             \
    OPT_CHOICE(T, field, "conv-algorithm", "auto|direct|winograd",                                               \
               "the 2-D convolutions on CPUs: winograd (oneDNN's F(4x4,3x3) for the 3x3 stride-1 layers: fewer " \
               "multiplications, its own rounding) or direct; auto: winograd for the ResNets and CAM++, direct " \
               "otherwise")
#define OPT_INVARIANT(T, field)                                                                               \
    OPT_SWITCH(T, field, "invariant",                                                                         \
               "world-size-invariant training: the same parameters, bit for bit, on any number of ranks and " \
               "threads for a given --global-batch (BatchNorm over the global batch, exact sums; docs/invariant.md)")
#define OPT_INVARIANT_GROUP(T, field)                                                                           \
    OPT_INTEGER(T, field, "invariant-group", 1, 1e6,                                                            \
                "--invariant: consecutive samples summed in float before their exact sum (faster; must divide " \
                "the per-rank batch of every world size the run uses; part of the result)")
#define OPT_INVARIANT_BN(T, field)                                                                                \
    OPT_CHOICE(T, field, "invariant-bn", "global|group",                                                          \
               "--invariant: BatchNorm's statistics over the global batch (synchronized, two exchanges a layer) " \
               "or over each --invariant-group of samples (no exchange; a group as large as the per-rank batch "  \
               "normalises as PyTorch DDP does; running statistics from the global batch's first group)")
// --model NAME: a row of the model registry (app/model/registry.h).
#define OPT_MODEL(T, field, help)       OPT_CHOICE_OF(T, field, "model", model_family_choices, help)
#define OPT_MODEL_AUDIO(T, field, help) OPT_CHOICE_OF(T, field, "model", model_family_choices_audio, help)
#define OPT_BATCH(T, field)             OPT_INTEGER(T, field, "batch", 1, 1e7, "per-rank batch: samples per rank and step")
#define OPT_CHANNELS(T, field)                 \
    OPT_INTEGER(T, field, "channels", 8, 4096, \
                "encoder width: ECAPA's C (default 512), a ResNet's m_channels (32), CAM++'s init_channels (128)")
#define OPT_SEED(T, field, help) OPT_INTEGER(T, field, "seed", 0, 9e15, help)
