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
