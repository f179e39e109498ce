# Kernel unit tests; include()d from tests/CMakeLists.txt. Each test is a plain executable
# that exits non-zero on a mismatch.
set(SPK_KERNEL_TESTS
  gemm conv1d batchnorm activation pooling tensor_ops aam_softmax xent linear optim)
foreach(_t IN LISTS SPK_KERNEL_TESTS)
  add_executable(test_kernel_${_t} ${CMAKE_CURRENT_LIST_DIR}/test_${_t}.c)
  target_link_libraries(test_kernel_${_t} spk_kernels)
  add_test(NAME kernel_${_t} COMMAND test_kernel_${_t})
  set_tests_properties(kernel_${_t} PROPERTIES LABELS unit)
endforeach()

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
