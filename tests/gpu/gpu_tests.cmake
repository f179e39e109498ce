# GPU kernel tests: the CUDA kernels (kernels/cuda/) against the CPU ones. include()d from
# tests/CMakeLists.txt; registered only when the CUDA backend is built. Without a visible
# device they print SKIPPED and exit 77, which ctest reports as skipped (never as passed).
# Run on a GPU machine with: ctest -L gpu --output-on-failure
if(SPKDDP_CUDA)
  add_executable(test_gpu_kernels ${CMAKE_CURRENT_LIST_DIR}/test_gpu_kernels.c)
  target_link_libraries(test_gpu_kernels PRIVATE spk_kernels spk_kernels_cuda)
  add_test(NAME gpu_kernels COMMAND test_gpu_kernels)
  set_tests_properties(gpu_kernels PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()
