# GPU tests: the CUDA path against the CPU path. Without a visible device they print SKIPPED
# and exit 77, which ctest reports as skipped (never as passed). On a GPU machine:
#   ctest -L gpu --output-on-failure      (or tools/gpu_check.sh)
spk_test_binary(gpu test_gpu_device)
add_test(NAME test_gpu_device COMMAND test_gpu_device)
set_tests_properties(test_gpu_device PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)

spk_device_test(gpu_e2e_cuda cuda 1e-3 "gpu;mpi")

if(SPKDDP_CUDA)
  add_executable(test_gpu_kernels ${CMAKE_CURRENT_LIST_DIR}/test_gpu_kernels.c)
  target_link_libraries(test_gpu_kernels PRIVATE spk_kernels spk_kernels_cuda)
  add_test(NAME gpu_kernels COMMAND test_gpu_kernels)
  set_tests_properties(gpu_kernels PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()
