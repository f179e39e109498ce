#!/usr/bin/env bash
# check_layers.sh can fail: each circle the tree once had, and each kind of include it forbids,
# is put back into a copy of the sources, and the check must refuse it, naming it; the copy
# unchanged must pass. Usage: check_layers_catches.sh [REPO]; exits 1 when a case is not caught
# (or no longer applies to the sources: then update its edit here).
set -uo pipefail
repo=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bad=0

# catches NAME EXPECT EDIT: EDIT (shell code) run in a fresh copy must change it, and the check
# must then exit 1 with a line matching EXPECT (an extended regular expression).
catches() {
    local name=$1 expect=$2 edit=$3 out rc
    rm -rf "$work/tree" && mkdir -p "$work/tree" && cp -r "$repo/app" "$repo/io" "$repo/kernels" "$work/tree/"
    (cd "$work/tree" && eval "$edit")
    if diff -r -q "$repo/app" "$work/tree/app" >/dev/null && diff -r -q "$repo/io" "$work/tree/io" >/dev/null &&
        diff -r -q "$repo/kernels" "$work/tree/kernels" >/dev/null; then
        echo "FAIL $name: the edit no longer applies to the sources"
        bad=1
        return
    fi
    out=$(bash "$repo/tests/layering/check_layers.sh" "$work/tree")
    rc=$?
    if [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -Eq "$expect"; then
        echo "ok   $name: $(printf '%s\n' "$out" | grep -E "$expect" | head -1)"
    else
        echo "FAIL $name: exit $rc, no line matching '$expect' in:"
        printf '%s\n' "$out" | sed 's/^/    /'
        bad=1
    fi
}

catches "a model family calls back into model.c, which dispatches to it" \
    'circle of [0-9]+ files: .*(app/model/linear/linear .*app/model/model|app/model/model .*app/model/linear/linear)' '
    printf "\nfloat *model_scratch(const model_t *m, size_t n) { return model_buf(m, n); }\n" >> app/model/model.c
    printf "float *model_scratch(const model_t *m, size_t n);\n" >> app/model/model.h
    sed -i "s|^#include \"app/model/linear/linear.h\"$|&\n#include \"app/model/model.h\"|; s|l->logits = model_buf(m|l->logits = model_scratch(m|" app/model/linear/linear.c'
catches "the model core calls model_loss_sum back in the statistics" \
    'circle of 2 files: .*app/model/core/model_(core|stats)' '
    sed -i "s|^#include \"app/model/core/model_core.h\"$|&\n#include \"app/model/core/model_stats.h\"|; s|^    if (m->invariant) m->be->xsum_zero(m->xgrads, m->table.total);$|&\n    if (m->invariant) (void)model_loss_sum(m);|" app/model/core/model_core.c'
catches "the FFmpeg decoder calls back into the audio front door" \
    'circle of 2 files: io/audio/audio(_ffmpeg)? io/audio/audio' '
    sed -i "s|^#include \"io/audio/audio_ffmpeg.h\"$|&\n#include \"io/audio/audio.h\"|; s|^    ff_close(&f);$|    ff_close(\&f);\n    if (rc != AUDIO_OK) audio_free(a);|" io/audio/audio_ffmpeg.c'
catches "ckpt_checksum.h includes checkpoint.h, whose .c calls the checksum" \
    'circle of 2 files: io/ckpt/(ckpt_checksum|checkpoint)' '
    sed -i "s|^#include \"io/ckpt/ckpt_format.h\"$|#include \"io/ckpt/checkpoint.h\"|" io/ckpt/ckpt_checksum.h'
catches "augment_config.c implements a declaration of augment.h" \
    'augment_config.c: defines augment_parse, which io/augment/augment.h declares' '
    sed -i "/^int augment_parse(/d" io/augment/augment_config.h
    printf "int augment_parse(const augment_config_t *c, augment_spec_t *s, char *err, size_t cap);\n" >> io/augment/augment.h
    sed -i "s|^#include \"io/augment/augment_config.h\"$|#include \"io/augment/augment.h\"|" io/augment/augment_config.c'
catches "dataset_read.c implements a declaration of dataset.h" \
    'dataset_read.c: defines dataset_read, which io/dataset/dataset.h declares' '
    sed -i "/^void dataset_read(/d" io/dataset/dataset_read.h
    printf "void dataset_read(dataset_t *ds, const stream_t *s, int n, const segment_t *segs, void *out);\n" >> io/dataset/dataset.h'
catches "the resume names include the training config that calls them" \
    'circle of 2 files: app/train/(resume_allow|train_config)' '
    sed -i "s|^#include <stddef.h>$|#include \"app/train/train_config.h\"\n&|" app/train/resume_allow.h'
catches "the CUDA context calls the convolution plans that take its handles" \
    'circle of 2 files: kernels/cuda/(conv_plans|context)' '
    sed -i "s|^    cublasCheck(cublasSetMathMode(g_ctx.cublas, allow ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));$|&\n    spk_conv1d_cuda_set_tf32(allow);|" kernels/cuda/context.cu'
catches "one model family includes another" \
    'linear/linear.c:[0-9]+: includes "app/model/ecapa/ecapa.h", which is above or beside its floor' '
    sed -i "s|^#include \"app/model/linear/linear.h\"$|&\n#include \"app/model/ecapa/ecapa.h\"|" app/model/linear/linear.c'
catches "two io wings side by side (scores includes ckpt)" \
    'io/scores/trials.c:[0-9]+: includes "io/ckpt/checkpoint.h"' '
    sed -i "s|^#include \"io/scores/trials.h\"$|&\n#include \"io/ckpt/checkpoint.h\"|" io/scores/trials.c'
catches "a model includes the loader rather than its batch.h" \
    'app/model/core/model_core.h:[0-9]+: includes "io/loader/loader.h"' '
    sed -i "s|^#include \"io/loader/batch.h\"$|#include \"io/loader/loader.h\"|" app/model/core/model_core.h'
catches "app/dist includes the CUDA backend privately" \
    'app/dist/device_select.c:[0-9]+: includes "kernels/cuda/context.h"' '
    sed -i "s|^#include \"kernels/device.h\"$|&\n#include \"kernels/cuda/context.h\"|" app/dist/device_select.c'
catches "a file back in the hall of io/" \
    'io/rng.h: stands in a folder that is no floor' '
    printf "#pragma once\n" > io/rng.h'

rm -rf "$work/tree" && mkdir -p "$work/tree" && cp -r "$repo/app" "$repo/io" "$repo/kernels" "$work/tree/"
if bash "$repo/tests/layering/check_layers.sh" "$work/tree" >/dev/null; then
    echo "ok   the sources as they are pass"
else
    echo "FAIL the sources as they are do not pass"
    bad=1
fi
exit $bad
