# The CUDA path on the CPU stand-in (label cuda-emu; docs/cuda.md, "The CPU stand-in"): the
# GPU kernel tests and a 2-rank --device cuda training, each under both scheduling orders,
# which must agree bitwise. Built when SPKDDP_CUDA_EMU is on (a C++ compiler is enough).
if(NOT SPKDDP_CUDA_EMU)
  return()
endif()
include(${CMAKE_CURRENT_LIST_DIR}/cuda_emu.cmake)

# A GPU test program on the stand-in: NAME_emu from SOURCES (paths under tests/), run by
# run_both_orders.sh forward and reverse; both runs must pass and hand the host the same bytes.
function(spk_cuda_emu_kernel_test name)
  list(TRANSFORM ARGN PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
  add_executable(${name}_emu ${ARGN})
  target_link_libraries(${name}_emu PRIVATE spk_kernels_emu)
  add_test(NAME cuda_emu_${name}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cuda_emu/run_both_orders.sh
                   ${CMAKE_CURRENT_BINARY_DIR}/work/cuda_emu_${name} $<TARGET_FILE:${name}_emu>)
  set_tests_properties(cuda_emu_${name} PROPERTIES LABELS cuda-emu TIMEOUT 600)
endfunction()

spk_cuda_emu_kernel_test(test_gpu_kernels gpu/test_gpu_kernels.c)

# The stand-in's own checks: each misuse it claims to catch is caught (test_emu_detects.cu).
spk_emu_cuda_library(spk_cuda_emu_selftest ${CMAKE_CURRENT_LIST_DIR}/test_emu_detects.cu)
add_executable(test_emu_detects ${CMAKE_CURRENT_LIST_DIR}/test_emu_main.c)
target_link_libraries(test_emu_detects PRIVATE spk_cuda_emu_selftest)
