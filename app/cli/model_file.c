#include "app/cli/model_file.h"

#include "app/cli/train_options.h"
#include "app/train/init_from.h"
#include "io/export/spkddp_meta.h"
#include "kernels/base/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int code;
    int is_safetensors;
    char err[1024];
    ckpt_meta_t meta;
} header_t;

// Rank 0: the file's header into h (a safetensors file stays read in wf).
static void read_header(const char *path, header_t *h, weights_file_t *wf) {
    if (safetensors_sniff(path)) {
        h->is_safetensors = 1;
        h->code = weights_file_read(path, wf, h->err, sizeof h->err);
        if (h->code == 0) h->code = spkddp_meta_read(&wf->st, path, &h->meta, h->err, sizeof h->err);
        return;
    }
    param_table_t p = {0}, s = {0};
    int slots;
    h->code = ckpt_peek(path, &h->meta, &p, &s, &slots, h->err, sizeof h->err);
    param_table_free(&p);
    param_table_free(&s);
}

model_t *model_file_load(const comm_t *comm, const char *path, const spk_backend_t *be, const char *precision,
                         const char *conv_algorithm, ckpt_meta_t *meta) {
    header_t *h = callocCheck(1, sizeof *h);
    weights_file_t wf = {0};
    if (comm->rank == 0) read_header(path, h, &wf);
    comm_bcast(comm, h, sizeof *h, MPI_BYTE, 0);
    if (h->code) spk_fail_all(h->code, "%s", h->err);
    train_config_t cfg = train_config_defaults();
    opt_deserialize(&train_options, &cfg, h->meta.config);
    model_config_t mc = train_config_model(&cfg);
    if (precision) snprintf(mc.precision, sizeof mc.precision, "%s", precision);
    snprintf(mc.conv_algorithm, sizeof mc.conv_algorithm, "%s", conv_algorithm ? conv_algorithm : "auto");
    const model_data_t md = {.feature_dim = h->meta.feature_dim,
                             .num_classes = h->meta.num_classes,
                             .visual_dim = h->meta.visual_dim,
                             .visual_ratio = h->meta.visual_ratio,
                             .source = path,
                             .ranks_per_node = comm->local_size};
    model_t *m = model_create(&mc, &md, be);
    if (comm->rank == 0) {
        if (h->is_safetensors) {  // a file without a classifier leaves the model's fresh one
            const int keep_head = weights_file_find(&wf, "classifier.weight") != NULL;
            h->code = init_from_copy(m, &wf, path, keep_head, h->err, sizeof h->err);
        } else {
            ckpt_tensors_t t = {&m->table, m->host_params, &m->state_table, m->host_state, 0, NULL};
            h->code = ckpt_load(path, m->name, &h->meta, &t, h->err, sizeof h->err);
            if (h->code == 0) model_use_teacher(m);  // a DINO run's embeddings are its teacher's
        }
    }
    weights_file_free(&wf);
    comm_bcast(comm, h, sizeof *h, MPI_BYTE, 0);
    if (h->code) spk_fail_all(h->code, "%s", h->err);
    comm_bcast(comm, m->host_params, m->table.total, MPI_FLOAT, 0);
    comm_bcast(comm, m->host_state, m->state_table.total, MPI_FLOAT, 0);
    model_upload(m);
    if (meta) *meta = h->meta;
    free(h);
    return m;
}
