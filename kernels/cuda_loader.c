// The spkddp program's CUDA entry points (kernels/cuda_module.h): each calls through the table
// of libspkddp_cuda.so. Device queries open the module on a machine with an NVIDIA GPU (or with
// SPKDDP_CUDA_PROBE=1); on one without, they answer "no device" without loading cuBLAS, cuDNN or
// NCCL, and until a query has opened it the CUDA backend is absent.
#include "kernels/cuda_module.h"

#include "kernels/base/check.h"
#include "kernels/base/env.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static _Atomic(const spk_cuda_module_t *) g_module;
static char g_why[512];  // why the module is not loaded, once opening it failed
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static const char no_gpu[] = "no usable CUDA device: this machine has no NVIDIA GPU";

// The module beside the program (a build tree), where `cmake --install` puts it
// (SPK_CUDA_MODULE_INSTALLED, relative to the program's folder), else where the dynamic loader
// looks: the program's search path ($ORIGIN/../lib in the GPU bundle), then LD_LIBRARY_PATH.
static void *open_module(void) {
    char exe[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *slash = n > 0 ? memrchr(exe, '/', (size_t)n) : NULL;
    if (slash) {
        *slash = 0;
        const char *const near[] = {"", SPK_CUDA_MODULE_INSTALLED "/"};
        for (size_t i = 0; i < sizeof near / sizeof near[0]; i++) {
            char path[PATH_MAX + 64];
            snprintf(path, sizeof path, "%s/%s" SPK_CUDA_MODULE_FILE, exe, near[i]);
            if (access(path, F_OK) == 0) return dlopen(path, RTLD_NOW | RTLD_LOCAL);
        }
    }
    return dlopen(SPK_CUDA_MODULE_FILE, RTLD_NOW | RTLD_LOCAL);
}

static void load(void) {
    void *h = open_module();
    const spk_cuda_module_t *m = h ? dlsym(h, "spk_cuda_module_table") : NULL;
    if (!m)
        snprintf(g_why, sizeof g_why, "the CUDA backend (%s) could not be loaded: %s", SPK_CUDA_MODULE_FILE, dlerror());
    else if (m->size != sizeof *m)
        snprintf(g_why, sizeof g_why, "the CUDA backend (%s) is from another build of spkddp", SPK_CUDA_MODULE_FILE);
    else
        atomic_store(&g_module, m);
}

// The module, opened on first use; NULL when it cannot be (g_why says why).
static const spk_cuda_module_t *opened(void) {
    pthread_once(&g_once, load);
    return atomic_load(&g_module);
}

// Whether device queries ask CUDA: on a machine that shows an NVIDIA GPU, or anywhere with
// SPKDDP_CUDA_PROBE=1 (for a GPU the file system does not show).
static int probe(void) { return spk_nvidia_gpu_present() || spk_env_switch("SPKDDP_CUDA_PROBE"); }

// The module for a device query: none where there is nothing to probe.
static const spk_cuda_module_t *for_query(void) { return probe() ? opened() : NULL; }

// Why for_query() gave none.
static const char *why_none(void) { return probe() ? g_why : no_gpu; }

// The module for calls that come only once the CUDA backend was chosen.
static const spk_cuda_module_t *chosen(void) {
    const spk_cuda_module_t *m = atomic_load(&g_module);
    if (!m) spk_die(SPK_EXIT_FAILURE, "the CUDA backend was called before it was loaded");
    return m;
}

// No GPU is an absence (0); a GPU whose module cannot be loaded, a failure (-1).
int spk_device_count(char *why, size_t cap) {
    const int asked = probe();
    const spk_cuda_module_t *m = asked ? opened() : NULL;
    if (m) return m->spk_device_count(why, cap);
    if (why) snprintf(why, cap, "%s", asked ? g_why : no_gpu);
    return asked ? -1 : 0;
}

int spk_device_select(int index, char *why, size_t cap) {
    const spk_cuda_module_t *m = for_query();
    if (m) return m->spk_device_select(index, why, cap);
    if (why) snprintf(why, cap, "%s", why_none());
    return -1;
}

int spk_device_pci_id(int index, char *out, size_t cap) {
    const spk_cuda_module_t *m = for_query();
    if (m) return m->spk_device_pci_id(index, out, cap);
    if (cap) out[0] = 0;
    return -1;
}

void spk_device_describe(int index, char *out, size_t cap) {
    const spk_cuda_module_t *m = for_query();
    if (m)
        m->spk_device_describe(index, out, cap);
    else if (cap)
        out[0] = 0;
}

// Opens the module with or without a GPU: `spkddp --version` shows whether it loads.
void spk_device_libraries(char *out, size_t cap) {
    const spk_cuda_module_t *m = opened();
    if (m)
        m->spk_device_libraries(out, cap);
    else
        snprintf(out, cap, "%s", g_why);
}

int spk_cuda_init(int device) {
    const spk_cuda_module_t *m = for_query();
    if (m) return m->spk_cuda_init(device);
    fprintf(stderr, "spkddp: error: %s\n", why_none());
    return -1;
}

// Absent until a device query opened the module.
const spk_backend_t *spk_backend_cuda(void) {
    const spk_cuda_module_t *m = atomic_load(&g_module);
    return m ? m->spk_backend_cuda() : NULL;
}

const spk_backend_t *spk_backend_cuda_invariant(void) {
    const spk_cuda_module_t *m = atomic_load(&g_module);
    return m ? m->spk_backend_cuda_invariant() : NULL;
}

void spk_device_profile(int on) { chosen()->spk_device_profile(on); }
void spk_cuda_shutdown(void) { chosen()->spk_cuda_shutdown(); }
void spk_cuda_set_tf32(int allow) { chosen()->spk_cuda_set_tf32(allow); }
size_t spk_cuda_bytes_in_use(void) { return chosen()->spk_cuda_bytes_in_use(); }
void spk_cuda_print_conv_plans(void) { chosen()->spk_cuda_print_conv_plans(); }

void nccl_comm_unique_id(void *id) { chosen()->nccl_comm_unique_id(id); }
nccl_comm_t *nccl_comm_create(int rank, int size, const void *id, double timeout_s) {
    return chosen()->nccl_comm_create(rank, size, id, timeout_s);
}
void nccl_allreduce_start(nccl_comm_t *n, float *buf, int64_t count) { chosen()->nccl_allreduce_start(n, buf, count); }
void nccl_allreduce_end(nccl_comm_t *n, int64_t total) { chosen()->nccl_allreduce_end(n, total); }
void nccl_allreduce_drain(nccl_comm_t *n, int64_t total) { chosen()->nccl_allreduce_drain(n, total); }
void nccl_exact_allreduce_start(nccl_comm_t *n, xsum_t s, int8_t *max, int64_t count) {
    chosen()->nccl_exact_allreduce_start(n, s, max, count);
}
void nccl_exact_words_start(nccl_comm_t *n, xsum_t s, float *y, int64_t count) {
    chosen()->nccl_exact_words_start(n, s, y, count);
}
void nccl_allgather(nccl_comm_t *n, const float *send, float *recv, int64_t count) {
    chosen()->nccl_allgather(n, send, recv, count);
}
void nccl_reduce_scatter(nccl_comm_t *n, const float *send, float *recv, int64_t count) {
    chosen()->nccl_reduce_scatter(n, send, recv, count);
}
void nccl_join(nccl_comm_t *n) { chosen()->nccl_join(n); }
void nccl_comm_destroy(nccl_comm_t *n) {
    if (n) chosen()->nccl_comm_destroy(n);  // NULL: none was made
}
