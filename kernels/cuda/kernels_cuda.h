// CUDA siblings of the CPU math kernels (kernels/*.h). Every op has the SAME parameter list
// as its CPU counterpart and a `_cuda` suffix; the semantics are the CPU header's (backward
// ACCUMULATES into gradients, NULL gradient outputs are skipped, y may alias x where the CPU
// header allows it). Differences:
//
//   - Every pointer is a DEVICE pointer, including scalar outputs (xent/aam `loss` and
//     `correct`) and integer labels.
//   - Everything runs asynchronously on one library-wide stream (spk_cuda_stream()). Results
//     are visible to the host after spk_cuda_download() or spk_cuda_sync().
//   - Scratch sizes come from the `_cuda` size functions (conv1d_workspace_floats_cuda needs
//     the cuDNN handle, so call it after spk_cuda_init).
//   - Hyperparameters passed by value (eps, momentum, lr, dloss, ...) are host values.
//
// Call spk_cuda_init() once before anything else and use the library from one host thread
// (the stream, the cuDNN/cuBLAS handles and the convolution plan cache are process-wide and
// unlocked). Any CUDA/cuDNN/cuBLAS failure prints file:line and a sentence, then aborts.
//
// Only available when spkddp is built with SPKDDP_CUDA (SPKDDP_HAVE_CUDA is defined then).
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- context and memory ---------------------------------------------------------------------
struct CUstream_st;  // cudaStream_t is `struct CUstream_st *`

// Selects `device`, creates the stream and the cuDNN/cuBLAS handles. Returns 0 on success (also
// when already initialised on the same device), -1 with a sentence on stderr otherwise.
int spk_cuda_init(int device);
// Waits for the stream, then releases the handles, cached plans, scratch and the stream.
void spk_cuda_shutdown(void);
// The stream every `_cuda` function runs on.
struct CUstream_st* spk_cuda_stream(void);

void* spk_cuda_malloc(size_t bytes);                               // cudaMalloc; NULL for 0
void spk_cuda_free(void* p);                                       // NULL is fine
void spk_cuda_memset0(void* p, size_t bytes);                      // on the stream
void spk_cuda_upload(void* dst, const void* src, size_t bytes);    // host -> device, blocking
void spk_cuda_download(void* dst, const void* src, size_t bytes);  // device -> host, blocking
void spk_cuda_sync(void);                                          // waits for the stream
size_t spk_cuda_bytes_in_use(void);  // device memory in use (all processes on the device)
// Allows TF32 tensor-core math in cuDNN convolutions and cuBLAS GEMMs (10-bit mantissa inputs,
// fp32 accumulation; Ampere and newer). Off by default: plain fp32. Re-plans convolutions.
void spk_cuda_set_tf32(int allow);

// ---- gemm.h ---------------------------------------------------------------------------------
// Row-major C = alpha op(A) op(B) + beta C through cuBLAS (fp32, no TF32).
void spk_sgemm_cuda(char transa, char transb, int M, int N, int K, float alpha, const float* A,
                    int lda, const float* B, int ldb, float beta, float* C, int ldc);

void spk_sgemm_batched_cuda(char transa, char transb, int M, int N, int K, float alpha,
                            const float* A, int lda, int64_t strideA, const float* B, int ldb,
                            int64_t strideB, float beta, float* C, int ldc, int64_t strideC,
                            int batch);

// ---- conv1d.h -------------------------------------------------------------------------------
// Floats of `workspace` the two conv calls need for this shape: the reflect-padded input (or
// padded input gradient) plus the largest cuDNN workspace of the chosen algorithms. Pass a
// workspace aligned like cudaMalloc's (256 bytes): the cuDNN part starts 256-byte aligned.
size_t conv1d_workspace_floats_cuda(int B, int Cin, int Cout, int T, int K, int dilation);
void conv1d_forward_cuda(float* y, const float* x, const float* w, const float* bias, int B,
                         int Cin, int Cout, int T, int K, int dilation, float* workspace);
void conv1d_backward_cuda(float* dx, float* dw, float* dbias, const float* dy, const float* x,
                          const float* w, int B, int Cin, int Cout, int T, int K, int dilation,
                          float* workspace);

// ---- batchnorm.h ----------------------------------------------------------------------------
void batchnorm1d_forward_train_cuda(float* y, float* mean, float* rstd, float* running_mean,
                                    float* running_var, const float* x, const float* weight,
                                    const float* bias, int B, int C, int T, float eps,
                                    float momentum);
void batchnorm1d_forward_infer_cuda(float* y, const float* x, const float* running_mean,
                                    const float* running_var, const float* weight,
                                    const float* bias, int B, int C, int T, float eps);
void batchnorm1d_backward_cuda(float* dx, float* dweight, float* dbias, const float* dy,
                               const float* x, const float* weight, const float* mean,
                               const float* rstd, int B, int C, int T);

// ---- activation.h ---------------------------------------------------------------------------
void relu_forward_cuda(float* y, const float* x, size_t n);
void relu_backward_cuda(float* dx, const float* dy, const float* y, size_t n);
void relu_mask_cuda(float* g, const float* y, size_t n);
void sigmoid_forward_cuda(float* y, const float* x, size_t n);
void sigmoid_backward_cuda(float* dx, const float* dy, const float* y, size_t n);
void tanh_forward_cuda(float* y, const float* x, size_t n);
void tanh_backward_cuda(float* dx, const float* dy, const float* y, size_t n);

// ---- pooling.h ------------------------------------------------------------------------------
void time_mean_forward_cuda(float* m, const float* x, int B, int C, int T);
void time_mean_backward_cuda(float* dx, const float* dm, int B, int C, int T);
void channel_scale_forward_cuda(float* y, const float* x, const float* s, int B, int C, int T);
void channel_scale_backward_cuda(float* dx, float* ds, const float* dy, const float* x,
                                 const float* s, int B, int C, int T);
void weighted_stats_forward_cuda(float* mean, float* std, const float* x, const float* w, int B,
                                 int C, int T, int ld, float eps);
void weighted_stats_backward_cuda(float* dx, float* dw, const float* dmean, const float* dstd,
                                  const float* x, const float* w, const float* mean,
                                  const float* std, int B, int C, int T, int ld, float eps);
void softmax_time_forward_cuda(float* y, const float* x, int B, int C, int T);
void softmax_time_backward_cuda(float* dx, const float* dy, const float* y, int B, int C, int T);

// ---- tensor_ops.h ---------------------------------------------------------------------------
void channel_slice_copy_cuda(float* dst, int dst_channels, const float* src, int src_channels,
                             int B, int C, int T);
void channel_slice_add_cuda(float* dst, int dst_channels, const float* src, int src_channels, int B,
                            int C, int T);
void time_repeat_forward_cuda(float* y, int y_channels, const float* s, int ld, int B, int C,
                              int T);
void time_repeat_backward_cuda(float* ds, int ld, const float* dy, int dy_channels, int B, int C,
                               int T);
void batch_transpose_cuda(float* y, const float* x, int B, int R, int C);
void vec_add_cuda(float* y, const float* a, const float* b, size_t n);
void vec_acc_cuda(float* y, const float* a, size_t n);
void vec_zero_cuda(float* y, size_t n);
void vec_copy_cuda(float* y, const float* a, size_t n);

// ---- aam_softmax.h --------------------------------------------------------------------------
// Same cache layout as the CPU (probs | cos_target | enorm | wnorm | ehat | what); the forward
// also keeps its per-row losses in the workspace, which is why it needs one on the GPU.
size_t aam_softmax_cache_floats_cuda(int B, int E, int S);
size_t aam_softmax_workspace_floats_cuda(int B, int E, int S);
void aam_softmax_forward_cuda(float* loss, int* correct, float* cache, const float* emb,
                              const float* w, const int* labels, int B, int E, int S, float margin,
                              float scale, float* workspace);
void aam_softmax_backward_cuda(float* demb, float* dw, float dloss, const float* cache,
                               const float* emb, const float* w, const int* labels, int B, int E,
                               int S, float margin, float scale, float* workspace);

// ---- xent.h ---------------------------------------------------------------------------------
void xent_forward_cuda(float* loss, int* correct, float* probs, const float* logits,
                       const int* labels, int B, int N);
void xent_backward_cuda(float* dlogits, float dloss, const float* probs, const int* labels, int B,
                        int N);

// ---- linear.h -------------------------------------------------------------------------------
void linear_forward_cuda(float* y, const float* x, const float* w, const float* b, int B, int In,
                         int Out);
void linear_backward_cuda(float* dx, float* dw, float* db, const float* dy, const float* x,
                          const float* w, int B, int In, int Out);

// ---- optim.h --------------------------------------------------------------------------------
void sgd_step_cuda(float* params, const float* grads, float* momentum_buf, size_t n, double lr,
                   double momentum, double dampening, double weight_decay, int nesterov,
                   int64_t step);
void adam_step_cuda(float* params, const float* grads, float* exp_avg, float* exp_avg_sq, size_t n,
                    double lr, double beta1, double beta2, double eps, double weight_decay,
                    int64_t step);
void adamw_step_cuda(float* params, const float* grads, float* exp_avg, float* exp_avg_sq, size_t n,
                     double lr, double beta1, double beta2, double eps, double weight_decay,
                     int64_t step);

#ifdef __cplusplus
}
#endif
