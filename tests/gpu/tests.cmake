# What only a GPU can check; every op's CUDA kernel against the CPU kernel is kernel_<op>_cuda
# (tests/kernels/tests.cmake). Without a visible device these print SKIPPED and exit 77, which
# ctest reports as skipped (never as passed). On a GPU machine:
#   ctest -L gpu --output-on-failure      (or tools/gpu_check.sh)
# test_gpu_device: discovery; test_gpu_tf32: --tf32 math reaches every convolution pass;
# test_gpu_conv_plans: the cuDNN plan cache; test_gpu_shapes: every op at production shapes;
# gpu_e2e_cuda: training, cross-device resume and
# embeddings against the CPU (tests/e2e/e2e_device.sh).
spk_test_binary(gpu test_gpu_device)
add_test(NAME test_gpu_device COMMAND test_gpu_device)
set_tests_properties(test_gpu_device PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)

add_executable(test_gpu_tf32 ${CMAKE_CURRENT_LIST_DIR}/test_gpu_tf32.c)
target_link_libraries(test_gpu_tf32 PRIVATE spk_kernels)
add_test(NAME test_gpu_tf32 COMMAND test_gpu_tf32)
set_tests_properties(test_gpu_tf32 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)

add_executable(test_gpu_conv_plans ${CMAKE_CURRENT_LIST_DIR}/test_gpu_conv_plans.c)
target_link_libraries(test_gpu_conv_plans PRIVATE spk_kernels)
add_test(NAME test_gpu_conv_plans COMMAND test_gpu_conv_plans)
set_tests_properties(test_gpu_conv_plans PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)

# Every op at ECAPA's production shapes (C=1024, batch 128, T=200) against the CPU, and run twice.
add_executable(test_gpu_shapes ${CMAKE_CURRENT_LIST_DIR}/test_gpu_shapes.c)
target_link_libraries(test_gpu_shapes PRIVATE spk_kernels)
add_test(NAME test_gpu_shapes COMMAND test_gpu_shapes)
set_tests_properties(test_gpu_shapes PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 900)

spk_device_test(gpu_e2e_cuda cuda 1e-5 "gpu;mpi")
