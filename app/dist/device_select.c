#include "app/dist/device_select.h"

#include "kernels/base/check.h"
#include "kernels/base/mpi_wait.h"
#include "kernels/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Every rank's verdict as one: the smallest value over ranks.
static int min_over_ranks(const comm_t *c, int v) {
    double d = -(double)v;
    comm_allreduce_max_f64(c, &d, 1);
    return (int)-d;
}

static int g_gpu_shared;  // two ranks of a node drive the same GPU

#ifdef SPKDDP_HAVE_CUDA
// Compares the PCI bus ids of the ranks of each node (CUDA_VISIBLE_DEVICES may number one GPU
// differently in each process). Collective; the answer is the same on every rank.
static int any_gpu_shared(const comm_t *c, int dev) {
    enum { ID = 32 };
    char mine[ID] = "";
    spk_device_pci_id(dev, mine, sizeof mine);
    MPI_Comm node;
    mpiCheck(MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node));
    char *all = callocCheck((size_t)c->local_size, ID);
    SPK_COLLECTIVE("the exchange of the GPUs' bus ids", MPI_Iallgather, mine, ID, MPI_CHAR, all, ID, MPI_CHAR, node);
    MPI_Comm_free(&node);
    int shared = 0;
    for (int i = 0; i < c->local_size; i++)
        for (int j = 0; j < i; j++)
            if (all[i * ID] && strncmp(all + i * ID, all + j * ID, ID) == 0) shared = 1;
    free(all);
    return !min_over_ranks(c, !shared);
}
#endif

int device_gpu_shared(void) { return g_gpu_shared; }

// Every rank sees `count` >= 1 GPUs (its own count: nodes may differ). NULL when a rank could
// not start its GPU and `required` is 0 (then nobody uses one).
static const spk_backend_t *select_cuda(const comm_t *c, int count, int required, const char *command) {
#ifdef SPKDDP_HAVE_CUDA
    const int dev = c->local_rank % count;
    const int ok = spk_cuda_init(dev) == 0;  // says why on stderr when it fails
    if (!min_over_ranks(c, ok)) {
        if (required)
            spk_fail_all(SPK_EXIT_FAILURE, "%s: --device cuda: a rank could not start its GPU (see the messages above)",
                         command);
        if (ok) spk_cuda_shutdown();
        return NULL;
    }
    char desc[256];
    spk_device_describe(dev, desc, sizeof desc);
    printf0("device: CUDA, rank 0 on GPU %d of %d: %s\n", dev, count, desc);
    g_gpu_shared = any_gpu_shared(c, dev);
    return spk_backend_cuda();
#else
    (void)c, (void)count, (void)required, (void)command;
    return NULL;
#endif
}

const char *device_default(void) {
    const char *d = getenv("SPKDDP_DEVICE");
    return d && d[0] ? d : "auto";
}

const spk_backend_t *device_select(const comm_t *c, const char *device, const char *command) {
    if (strcmp(device, "cpu") != 0 && strcmp(device, "cuda") != 0 && strcmp(device, "auto") != 0 &&
        strcmp(device, "cpu-staged") != 0)  // the option table checked --device: this came from SPKDDP_DEVICE
        spk_fail_all(SPK_EXIT_USAGE, "%s: device '%s' (from SPKDDP_DEVICE) must be one of " DEVICE_CHOICES, command,
                     device);
    if (strcmp(device, "cpu") == 0) return &spk_backend_cpu;
    if (strcmp(device, "cpu-staged") == 0) {
        printf0("device: CPU kernels behind device-style copies (cpu-staged, for testing)\n");
        return &spk_backend_cpu_staged;
    }
    char why[256] = "";
    const int required = strcmp(device, "cuda") == 0;
    const int count = spk_device_count(why, sizeof why);
    if (min_over_ranks(c, count) > 0) {  // every rank has a GPU
        const spk_backend_t *be = select_cuda(c, count, required, command);
        if (be) return be;
        snprintf(why, sizeof why, "a rank could not start its GPU (see the messages above)");
    }
    if (required)
        spk_fail_all(SPK_EXIT_USAGE, "%s: --device cuda: %s", command, why[0] ? why : "a rank sees no CUDA device");
    // A machine without an NVIDIA GPU runs on the CPU without a word; a GPU CUDA could not use
    // (no driver, an old one, a device that did not start) is worth one, from rank 0.
    const int worth_a_line = count < 0 || spk_nvidia_gpu_present();
    if (min_over_ranks(c, !worth_a_line) == 0)
        printf0("device: %s; running on the CPU\n", why[0] ? why : "a rank sees no CUDA device");
    return &spk_backend_cpu;
}

void device_set_precision(const comm_t *c, const spk_backend_t *be, const char *precision) {
    const int tf32 = strcmp(precision, "tf32") == 0, bf16 = strcmp(precision, "bf16") == 0;
#ifdef SPKDDP_HAVE_CUDA
    if (be == spk_backend_cuda()) {
        spk_cuda_set_tf32(tf32);
        if (tf32) printf0("device: TF32 tensor-core math allowed in convolutions and GEMMs\n");
        if (bf16) printf0("device: bf16 operands on tensor cores, fp32 accumulation\n");
        return;
    }
#endif
    if (tf32) printf0("device: --precision tf32 does not apply on %s (it computes in fp32)\n", be->name);
    if (bf16 && !min_over_ranks(c, spk_gemm_bf16_native()))
        printf0(
            "device: a rank's CPU has no native bf16 instructions (AVX512-BF16 or AMX, through oneDNN): its bf16 "
            "GEMMs run widened to fp32, slower than --precision fp32\n");
}

void device_release(const spk_backend_t *be) {
#ifdef SPKDDP_HAVE_CUDA
    if (be == spk_backend_cuda()) spk_cuda_shutdown();
#else
    (void)be;
#endif
}
