// The backend tables (kernels/cpu/backend_cpu.c, kernels/cuda/backend_cuda.c): the CPU tables
// hold the CPU kernels and say whether their memory is separate; every backend fills every op,
// allocates zero-filled memory and moves bytes both ways unchanged. Each has a world-size-
// invariant twin: the same memory and ops but for the replacements of SPK_INVARIANT_OPS.
#include "backends.h"

static void cpu_checks(void) {
    check_true(strcmp(spk_backend_cpu.name, "cpu") == 0 && !spk_backend_cpu.separate_memory,
               "the cpu backend works on host memory");
    check_true(strcmp(spk_backend_cpu_staged.name, "cpu-staged") == 0 && spk_backend_cpu_staged.separate_memory,
               "the cpu-staged backend has memory of its own");
#define CHECK_CPU_OP(op)                                                    \
    check_true(spk_backend_cpu.op == op && spk_backend_cpu_staged.op == op, \
               "the cpu backends run the CPU "                              \
               "kernel " #op);
    SPK_BACKEND_OPS(CHECK_CPU_OP)
#undef CHECK_CPU_OP
    const spk_backend_t *twin = spk_backend_invariant(&spk_backend_cpu);
    check_true(twin->invariant && !spk_backend_cpu.invariant && spk_backend_invariant(twin) == twin &&
                   twin == spk_backend_invariant(&spk_backend_cpu) &&
                   spk_backend_invariant(&spk_backend_cpu_staged)->separate_memory,
               "each cpu backend has one invariant twin, which is its own");
#define CHECK_REPLACED(op, replacement)                                   \
    check_true(twin->op == replacement && twin->op != spk_backend_cpu.op, \
               "the invariant twin runs " #replacement " for " #op);
    SPK_INVARIANT_OPS(CHECK_REPLACED)
#undef CHECK_REPLACED
    check_true(twin->conv1d_backward_exact == conv1d_backward_exact && twin->relu_forward == relu_forward &&
                   twin->alloc == spk_backend_cpu.alloc,
               "the invariant twin keeps the other ops and the memory");
}

static void backend_checks(void) {
#define CHECK_FILLED(op) check_true(g_be->op != NULL, cname("[%s] has " #op, g_be->name));
    SPK_BACKEND_OPS(CHECK_FILLED)
#undef CHECK_FILLED
    const spk_backend_t *twin = spk_backend_invariant(g_be);
#define CHECK_TWIN(op, replacement) check_true(twin->op != NULL, cname("[%s] invariant twin has " #op, g_be->name));
    SPK_INVARIANT_OPS(CHECK_TWIN)
#undef CHECK_TWIN
    const size_t n = 1000;
    const float *zeros = zeros_f(n);
    float *d = dev_f(NULL, n);
    cmp("fresh memory is zero-filled", d, zeros, n, 0.0);
    const float *h = rand_f(n, -1, 1);
    dev_set(d, h, n);
    cmp("upload/download round trip", d, h, n, 0.0);
    float *d0 = (float *)g_be->alloc(0);  // a zero-byte allocation is a valid pointer to free
    g_be->free(d0);
    g_be->free(NULL);
    g_be->sync();
}

int main(int argc, char **argv) { return test_main(argc, argv, "test_backend", 1, cpu_checks, backend_checks); }
