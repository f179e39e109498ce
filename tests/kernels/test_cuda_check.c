// The CUDA error path (kernels/cuda/cuda_check.h): a failed CUDA, cuDNN, cuBLAS or NCCL call
// ends the process through spk_die_at with exit 1 and one line naming the rank, the call, the
// library's explanation and file:line. Needs no GPU: the libraries explain their error codes
// without a device.
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/cuda/cuda_check.h"
#include "test_common.h"

// Runs fail() in a child process; it must exit 1 with `want` and this file's name on stderr.
static void expect_death(const char *what, void (*fail)(void), const char *want) {
    int fd[2];
    if (pipe(fd) != 0) exit(2);
    fflush(NULL);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        fail();
        _exit(0);  // the check did not end the process
    }
    close(fd[1]);
    char out[2048] = "";
    size_t len = 0;
    ssize_t got;
    while (len < sizeof out - 1 && (got = read(fd[0], out + len, sizeof out - 1 - len)) > 0) len += (size_t)got;
    close(fd[0]);
    out[len] = 0;
    int status = 0;
    waitpid(pid, &status, 0);
    char nm[128];
    snprintf(nm, sizeof nm, "%s: exits 1", what);
    check_true(WIFEXITED(status) && WEXITSTATUS(status) == 1, nm);
    snprintf(nm, sizeof nm, "%s: says which call failed and why", what);
    check_true(strstr(out, want) != NULL, nm);
    snprintf(nm, sizeof nm, "%s: names the rank and file:line", what);
    check_true(strstr(out, "spkddp: error: [rank 0] ") == out && strstr(out, "test_cuda_check.c:"), nm);
    if (g_failures) printf("stderr of the %s failure: %s\n", what, out);
}

static void cuda_fails(void) { cudaCheck(cudaErrorMemoryAllocation); }
static void cudnn_fails(void) { cudnnCheck(CUDNN_STATUS_BAD_PARAM); }
static void cublas_fails(void) { cublasCheck(CUBLAS_STATUS_INVALID_VALUE); }
static void nccl_fails(void) { ncclCheck(ncclInvalidArgument); }
static void launch_fails(void) {
    cudaSetDevice(-1);  // leaves an error for cudaGetLastError, as a failed launch does
    SPK_CUDA_LAUNCHED();
}
static void succeeds(void) {
    cudaCheck(cudaSuccess);
    cudnnCheck(CUDNN_STATUS_SUCCESS);
    cublasCheck(CUBLAS_STATUS_SUCCESS);
    ncclCheck(ncclSuccess);
}

int main(void) {
    expect_death("cudaCheck", cuda_fails,
                 "CUDA call cudaErrorMemoryAllocation failed: out of memory "
                 "(cudaErrorMemoryAllocation)");
    expect_death("cudnnCheck", cudnn_fails, "cuDNN call CUDNN_STATUS_BAD_PARAM failed: ");
    expect_death("cublasCheck", cublas_fails, "cuBLAS call CUBLAS_STATUS_INVALID_VALUE failed: ");
    expect_death("ncclCheck", nccl_fails, "NCCL call ncclInvalidArgument failed: ");
    expect_death("SPK_CUDA_LAUNCHED", launch_fails, "CUDA call kernel launch failed: ");
    succeeds();
    return test_finish("test_cuda_check");
}
