# Kernel tests; include()d from tests/CMakeLists.txt. One binary per op (tests/kernels/test_<op>.c
# for kernels/cpu/<op>.c and kernels/cuda/<op>.cu), run twice: kernel_<op> checks the CPU kernels
# and the cpu and cpu-staged backends, kernel_<op>_cuda the CUDA backend against the CPU kernels
# (skipped, exit 77, without a usable device). Each exits non-zero on a mismatch.
set(SPK_KERNEL_TESTS
  backend gemm conv1d batchnorm activation pooling tensor_ops aam_softmax aam_shard xent linear optim
  exact_sum norm bf16 gemm_bf16 conv1d_bf16 conv2d conv2d_bf16 batchnorm2d dense_bn segment_pool rows_norm dino)
foreach(_t IN LISTS SPK_KERNEL_TESTS)
  add_executable(test_kernel_${_t} ${CMAKE_CURRENT_LIST_DIR}/test_${_t}.c)
  target_link_libraries(test_kernel_${_t} spk_kernels)
  add_test(NAME kernel_${_t} COMMAND test_kernel_${_t} cpu cpu-staged)
  set_tests_properties(kernel_${_t} PROPERTIES LABELS unit)
  add_test(NAME kernel_${_t}_cuda COMMAND test_kernel_${_t} cuda)
  set_tests_properties(kernel_${_t}_cuda PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)
endforeach()

# The 2-D convolutions as oneDNN runs them where its best kernels are AVX2's (the blocked direct
# plans of kernels/cpu/conv2d_dnnl.c), also on an AVX-512 machine.
add_test(NAME kernel_conv2d_avx2 COMMAND test_kernel_conv2d cpu)
set_tests_properties(kernel_conv2d_avx2 PROPERTIES LABELS unit ENVIRONMENT ONEDNN_MAX_CPU_ISA=AVX2)

# The metric-learning losses (host code on every backend) against a float64 reference.
add_executable(test_contrastive ${CMAKE_CURRENT_LIST_DIR}/test_contrastive.c)
target_link_libraries(test_contrastive spk_kernels)
add_test(NAME kernel_contrastive COMMAND test_contrastive)
set_tests_properties(kernel_contrastive PROPERTIES LABELS unit)

# The CUDA error path (kernels/cuda/cuda_check.h); runs without a GPU.
if(SPKDDP_CUDA)
  add_executable(test_kernel_cuda_check ${CMAKE_CURRENT_LIST_DIR}/test_cuda_check.c)
  target_link_libraries(test_kernel_cuda_check spk_kernels)
  add_test(NAME kernel_cuda_check COMMAND test_kernel_cuda_check)
  set_tests_properties(kernel_cuda_check PROPERTIES LABELS unit)
endif()

# kernels/base's child processes: output, status, deadline, cap, the mask a child starts with.
add_executable(test_child_process ${CMAKE_CURRENT_LIST_DIR}/test_child_process.c)
target_link_libraries(test_child_process spk_base)
add_test(NAME test_child_process COMMAND test_child_process)
set_tests_properties(test_child_process PROPERTIES LABELS unit TIMEOUT 60)

# kernels/base's settings from the environment: accepted forms, and a usage error for the rest.
add_executable(test_env ${CMAKE_CURRENT_LIST_DIR}/test_env.c)
target_link_libraries(test_env spk_base)
add_test(NAME test_env COMMAND test_env)
set_tests_properties(test_env PROPERTIES LABELS unit TIMEOUT 60)

# Convolution benchmark (not a test). With oneDNN installed it also times oneDNN's own
# convolution primitives for comparison.
add_executable(bench_kernels ${CMAKE_CURRENT_LIST_DIR}/../../tools/bench_kernels.c)
target_link_libraries(bench_kernels spk_kernels)
find_library(SPK_BENCH_DNNL_LIB dnnl)
find_path(SPK_BENCH_DNNL_INCLUDE oneapi/dnnl/dnnl.h)
if(SPK_BENCH_DNNL_LIB AND SPK_BENCH_DNNL_INCLUDE)
  target_compile_definitions(bench_kernels PRIVATE SPK_BENCH_DNNL)
  target_include_directories(bench_kernels PRIVATE ${SPK_BENCH_DNNL_INCLUDE})
  target_link_libraries(bench_kernels ${SPK_BENCH_DNNL_LIB})
endif()

# The machine's float32 and bf16 arithmetic peaks (not a test), for tools/bench.sh.
add_executable(bench_peak ${CMAKE_CURRENT_LIST_DIR}/../../tools/bench_peak.c)
target_link_libraries(bench_peak OpenMP::OpenMP_C)

# The 2-D convolution's algorithms on ResNet34's layers (not a test).
add_executable(bench_conv2d ${CMAKE_CURRENT_LIST_DIR}/../../tools/bench_conv2d.c)
target_link_libraries(bench_conv2d spk_kernels)

# What a bf16 Winograd would lose against the direct bf16 convolution (not a test).
add_executable(winograd_bf16_error ${CMAKE_CURRENT_LIST_DIR}/../../tools/winograd_bf16_error.c)
target_link_libraries(winograd_bf16_error spk_kernels)
