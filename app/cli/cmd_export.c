// `spkddp export --ckpt C --format safetensors|onnx --out F`: a trained model for other
// toolkits (docs/interop.md).
//   safetensors: every tensor under the state-dict name of the toolkit that defines the model
//     (SpeechBrain's ECAPA_TDNN, WeSpeaker's ResNets; the AAM-softmax weights as
//     "classifier.weight"), BatchNorm running statistics, and for each BatchNorm the int64
//     num_batches_tracked PyTorch keeps: the checkpoint's global step, the training forward
//     passes every BatchNorm took. Metadata: the toolkit's class and constructor arguments, the
//     feature description and what rebuilds the model (io/export/spkddp_meta.h).
//   onnx: the encoder as an ONNX graph, fbank in, embedding out (app/model/model_export.h).
#include "app/cli/commands.h"
#include "app/cli/model_file.h"
#include "app/cli/options.h"
#include "app/dist/device_select.h"
#include "app/model/model_export.h"
#include "io/common/out_paths.h"
#include "io/export/spkddp_meta.h"
#include "kernels/base/check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char ckpt[OPT_STR_MAX], format[OPT_STR_MAX], out[OPT_STR_MAX];
} export_opts_t;

static const opt_t rows[] = {
    OPT_TEXT(export_opts_t, ckpt, "ckpt", OPT_REQUIRED,
             "checkpoint of a trained model (or a safetensors file from export)"),
    OPT_CHOICE(
        export_opts_t, format, "format", "safetensors|onnx",
        "safetensors: every tensor under its toolkit's state-dict names (SpeechBrain, WeSpeaker); onnx: the encoder "
        "as an ONNX graph (--model ecapa)"),
    OPT_TEXT(export_opts_t, out, "out", OPT_REQUIRED, "file to write (replaced if it exists)"),
};
static const opt_table_t table =
    OPT_TABLE("export", "Export a trained model for PyTorch/SpeechBrain (safetensors) or ONNX Runtime (onnx).", rows);

// What the features are: the model's input contract, for whoever feeds it.
#define FEATURES_NOTE                                                                                             \
    "Kaldi log mel filterbank (compute-fbank-feats defaults, 25 ms windows every 10 ms, dither 0, 16-bit sample " \
    "scale; spkddp prepare, docs/features.md), feature_dim bins; each utterance mean-normalised over its frames " \
    "before "                                                                                                     \
    "the encoder"

static const char *SUFFIX = ".running_mean";

// The checkpoint's tensors, then one num_batches_tracked per BatchNorm.
static int write_safetensors(const model_t *m, const ckpt_meta_t *meta, const char *path, char *err, size_t cap) {
    const int np = m->table.count, ns = m->state_table.count;
    st_tensor_t *t = callocCheck((size_t)(np + 2 * ns + 1), sizeof *t);
    int n = 0;
    const int64_t steps = meta->global_step;
    for (int k = 0; k < 2; k++) {
        const param_table_t *p = k ? &m->state_table : &m->table;
        const float *data = k ? m->host_state : m->host_params;
        for (int i = 0; i < p->count; i++) {
            const param_tensor_t *x = &p->t[i];
            if (model_training_only(x->name)) continue;  // (the teacher is the parameters here)
            st_tensor_t *o = &t[n++];
            snprintf(o->name, sizeof o->name, "%s", x->name);
            o->dtype = ST_F32;
            o->ndim = x->ndim;
            memcpy(o->shape, x->shape, (size_t)x->ndim * sizeof(int64_t));
            o->numel = x->numel;
            o->data = data + x->offset;
            const size_t len = strlen(x->name), sl = strlen(SUFFIX);
            if (k && len > sl && strcmp(x->name + len - sl, SUFFIX) == 0) {
                st_tensor_t *c = &t[n++];
                *c = (st_tensor_t){.dtype = ST_I64, .ndim = 0, .numel = 1, .data = &steps};
                snprintf(c->name, sizeof c->name, "%.*s.num_batches_tracked", (int)(len - sl), x->name);
            }
        }
    }
    spkddp_meta_t md;
    spkddp_meta_fill(&md, meta);
    model_speechbrain_t sb;
    if (model_speechbrain(m, &sb) == 0) {
        spkddp_meta_add(&md, "speechbrain_encoder", sb.encoder);
        spkddp_meta_add(&md, "speechbrain_encoder_args", sb.encoder_args);
        spkddp_meta_add(&md, "speechbrain_classifier", sb.classifier);
        spkddp_meta_add(&md, "speechbrain_classifier_args", sb.classifier_args);
    }
    model_toolkit_t tk;
    model_toolkit(m, &tk);
    char key_model[48], key_args[64];                          // "wespeaker_model", "wespeaker_model_args"
    if (tk.model && strcmp(tk.toolkit, "SpeechBrain") != 0) {  // SpeechBrain's keys are above
        snprintf(key_model, sizeof key_model, "%s_model", tk.toolkit);
        for (char *c = key_model; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
        snprintf(key_args, sizeof key_args, "%.47s_args", key_model);
        spkddp_meta_add(&md, key_model, tk.model);
        spkddp_meta_add(&md, key_args, tk.args);
    }
    spkddp_meta_add(&md, "features", FEATURES_NOTE);
    spkddp_meta_add(&md, "num_batches_tracked",
                    "the global step of the checkpoint (training forward passes of every BatchNorm)");
    int rc = safetensors_write(path, t, n, md.kv, md.n, err, cap) ? SPK_EXIT_FAILURE : 0;
    if (rc == 0)
        printf(
            "wrote %s: %d tensors of model %s (%s state-dict names, BatchNorm statistics, num_batches_tracked %lld)\n",
            path, n, m->name, tk.toolkit, (long long)steps);
    free(t);
    return rc;
}

static int write_onnx(const model_t *m, const ckpt_meta_t *meta, const char *path, char *err, size_t cap) {
    spkddp_meta_t md;
    spkddp_meta_fill(&md, meta);
    spkddp_meta_add(&md, "features", FEATURES_NOTE);
    spkddp_meta_add(
        &md, "input",
        "fbank: (batch, frames, feature_dim) float32, raw features; the graph subtracts each utterance's mean");
    spkddp_meta_add(&md, "output",
                    "embedding: (batch, emb_dim) float32, as spkddp embed computes it (not length-normalised)");
    int rc = model_onnx_write(m, path, md.kv, md.n, err, cap);
    if (rc == 0)
        printf(
            "wrote %s: ONNX opset 17 graph of the %s encoder (fbank (batch, frames, %lld) -> embedding (batch, "
            "%lld))\n",
            path, m->name, (long long)m->feature_dim, (long long)m->emb_dim);
    return rc;
}

int cmd_export(const comm_t *comm, int argc, char **argv) {
    export_opts_t o = {0};
    snprintf(o.format, sizeof o.format, "safetensors");
    opt_parse(&table, &o, argc, argv, NULL, 0);
    out_paths_check("export", (const path_arg_t[]){{"--out", o.out}}, 1, (const path_arg_t[]){{"--ckpt", o.ckpt}}, 1);
    const spk_backend_t *be = device_select(comm, "cpu", "export");
    ckpt_meta_t *meta = callocCheck(1, sizeof *meta);
    model_t *m = model_file_load(comm, o.ckpt, be, NULL, NULL, meta);
    struct {
        int code;
        char err[1024];
    } r = {0};
    if (comm->rank == 0) {
        if (strcmp(o.format, "onnx") == 0)
            r.code = write_onnx(m, meta, o.out, r.err, sizeof r.err);
        else
            r.code = write_safetensors(m, meta, o.out, r.err, sizeof r.err);
    }
    comm_bcast(comm, &r, sizeof r, MPI_BYTE, 0);
    free(meta);
    model_free(m);
    device_release(be);
    if (r.code) spk_fail_all(r.code, "%s", r.err);
    return SPK_EXIT_OK;
}
