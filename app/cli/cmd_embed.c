// `spkddp embed`: full-length embeddings of every utterance of a dataset in inference mode,
// sharded across ranks (app/eval/embedder.h) and written in utterance order by rank 0.
#include "app/cli/commands.h"
#include "app/cli/common_options.h"
#include "app/cli/train_options.h"
#include "app/dist/device_select.h"
#include "app/eval/embedder.h"
#include "app/model/model.h"
#include "io/checkpoint.h"
#include "io/dataset.h"
#include "io/embeddings.h"
#include "io/h5util.h"
#include "kernels/base/check.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char ckpt[OPT_STR_MAX], data[OPT_STR_MAX], out[OPT_STR_MAX], device[OPT_STR_MAX];
    char precision[8];  // of this run, whatever the training's was
    int64_t batch;
} embed_opts_t;

static const opt_t rows[] = {
    OPT_TEXT(embed_opts_t, ckpt, "ckpt", OPT_REQUIRED, "checkpoint of a trained model"),
    OPT_TEXT(embed_opts_t, data, "data", OPT_REQUIRED, "dataset to embed (HDF5 features)"),
    OPT_TEXT(embed_opts_t, out, "out", OPT_REQUIRED, "embeddings file to write (HDF5)"),
    OPT_BATCH(embed_opts_t, batch),
    OPT_DEVICE(embed_opts_t, device),
    OPT_PRECISION(embed_opts_t, precision),
};
static const opt_table_t table =
    OPT_TABLE("embed", "Embed every utterance of a dataset with a trained model (inference mode).", rows);

// Rank 0 reads the checkpoint's header; everyone builds the same model from its config, in
// `precision`.
static model_t *load_model(const comm_t *comm, const char *path, const spk_backend_t *be, const char *precision) {
    struct {
        int code;
        char err[1024];
        ckpt_meta_t meta;
    } *h = callocCheck(1, sizeof *h);
    if (comm->rank == 0) {
        param_table_t p = {0}, s = {0};
        int slots;
        h->code = ckpt_peek(path, &h->meta, &p, &s, &slots, h->err, sizeof h->err);
        param_table_free(&p);
        param_table_free(&s);
    }
    comm_bcast(comm, h, sizeof *h, MPI_BYTE, 0);
    if (h->code) spk_fail_all(h->code, "%s", h->err);
    train_config_t cfg = train_config_defaults();
    opt_deserialize(&train_options, &cfg, h->meta.config);
    model_config_t mc = train_config_model(&cfg);
    snprintf(mc.precision, sizeof mc.precision, "%s", precision);
    model_t *m = model_create(&mc, &(model_data_t){h->meta.feature_dim, h->meta.num_classes, h->meta.visual_dim,
                                                   h->meta.visual_ratio, path}, be);
    if (comm->rank == 0) {
        ckpt_tensors_t t = {&m->table, m->host_params, &m->state_table, m->host_state, 0, NULL};
        h->code = ckpt_load(path, m->name, &h->meta, &t, h->err, sizeof h->err);
    }
    comm_bcast(comm, h, sizeof *h, MPI_BYTE, 0);
    if (h->code) spk_fail_all(h->code, "%s", h->err);
    comm_bcast(comm, m->host_params, m->table.total, MPI_FLOAT, 0);
    comm_bcast(comm, m->host_state, m->state_table.total, MPI_FLOAT, 0);
    model_upload(m);
    free(h);
    return m;
}

int cmd_embed(const comm_t *comm, int argc, char **argv) {
    embed_opts_t o = {.batch = 16, .precision = "fp32"};
    snprintf(o.device, sizeof o.device, "%s", device_default());
    opt_parse(&table, &o, argc, argv, NULL, 0);
    const spk_backend_t *be = device_select(comm, o.device, "embed");
    device_set_precision(comm, be, o.precision);
    model_t *m = load_model(comm, o.ckpt, be, o.precision);
    dataset_t ds;
    dataset_open(&ds, o.data, comm->world);
    if (ds.feature_dim != m->feature_dim)
        spk_fail_all(SPK_EXIT_DATA, "%s: feature_dim %lld, but the model in %s was trained on %lld", o.data,
                     (long long)ds.feature_dim, o.ckpt, (long long)m->feature_dim);

    const int64_t N = ds.num_utts, E = m->emb_dim;
    embeddings_t out = {.n = N, .dim = E};
    out.emb = embed_dataset(comm, m, &ds, o.batch);
    if (comm->rank == 0) {
        out.labels = ds.labels;
        out.utt_ids = h5_read_strings(ds.file, "utt_ids", N);
        if (!out.utt_ids) {  // datasets without names: position in the file
            out.utt_ids = callocCheck((size_t)N, sizeof(char *));
            for (int64_t i = 0; i < N; i++) {
                out.utt_ids[i] = mallocCheck(24);
                snprintf(out.utt_ids[i], 24, "utt%07lld", (long long)i);
            }
        }
        embeddings_write(o.out, &out, m->name);
        printf("wrote %s: %lld embeddings of dimension %lld (model %s from %s)\n", o.out, (long long)N, (long long)E, m->name,
               o.ckpt);
        h5_free_strings(out.utt_ids, N);
    }
    comm_barrier(comm);
    free(out.emb);
    dataset_close(&ds);
    model_free(m);
    device_release(be);
    return SPK_EXIT_OK;
}
