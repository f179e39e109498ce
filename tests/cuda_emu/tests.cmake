# The CUDA path on the CPU stand-in (label cuda-emu; docs/cuda.md, "The CPU stand-in"): the
# GPU kernel tests and a 2-rank --device cuda training, each under both scheduling orders,
# which must agree bitwise. Built when SPKDDP_CUDA_EMU is on (a C++ compiler is enough).
if(NOT SPKDDP_CUDA_EMU)
  return()
endif()
include(${CMAKE_CURRENT_LIST_DIR}/cuda_emu.cmake)

# A GPU test program on the stand-in: NAME_emu from SOURCES (paths under tests/), run with
# ARGS by run_both_orders.sh forward and reverse; both runs must pass and hand the host the
# same bytes.
function(spk_cuda_emu_kernel_test name)
  cmake_parse_arguments(PARSE_ARGV 1 T "" "" "SOURCES;ARGS")
  list(TRANSFORM T_SOURCES PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
  add_executable(${name}_emu ${T_SOURCES})
  target_link_libraries(${name}_emu PRIVATE spk_kernels_emu)
  add_test(NAME cuda_emu_${name}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cuda_emu/run_both_orders.sh
                   ${CMAKE_CURRENT_BINARY_DIR}/work/cuda_emu_${name} $<TARGET_FILE:${name}_emu> ${T_ARGS})
  set_tests_properties(cuda_emu_${name} PROPERTIES LABELS cuda-emu TIMEOUT 600)
endfunction()

# The CUDA kernel tests: each tests/kernels/test_<op>.c with its cuda backend (the ops are
# tests/kernels/tests.cmake's SPK_KERNEL_TESTS) and the TF32 test.
foreach(t IN LISTS SPK_KERNEL_TESTS)
  spk_cuda_emu_kernel_test(test_kernel_${t} SOURCES kernels/test_${t}.c ARGS cuda)
endforeach()
spk_cuda_emu_kernel_test(test_gpu_device SOURCES gpu/test_gpu_device.c)
# The TF32 check's code at shapes the stand-in affords (production: C=1024, batch 32, T=200).
spk_cuda_emu_kernel_test(test_gpu_tf32 SOURCES gpu/test_gpu_tf32.c ARGS 64 4 100)
spk_cuda_emu_kernel_test(test_gpu_conv_plans SOURCES gpu/test_gpu_conv_plans.c ARGS small)
# The production-shape test's code, at shapes the stand-in affords (C=32, batch 4, T=24).
spk_cuda_emu_kernel_test(test_gpu_shapes SOURCES gpu/test_gpu_shapes.c ARGS 32 4 24)
# The invariant mode's 2-D ops at shapes the stand-in affords (GPU: width 32, batch 16, 80 x 200).
spk_cuda_emu_kernel_test(test_gpu_invariant2d SOURCES gpu/test_gpu_invariant2d.c ARGS 8 8 9 10)
# A cuDNN that reports fp32 kernels as CUDNN_DEFAULT_MATH and its backward tensor-core kernels as
# non-deterministic: the heuristics' choices are still taken (not the fallback) and TF32 still
# reaches every convolution pass. One order: those kernels are not deterministic.
add_test(NAME cuda_emu_test_gpu_tf32_default_report
         COMMAND ${CMAKE_COMMAND} -E env SPKDDP_CUDA_EMU_CUDNN_REPORT=default $<TARGET_FILE:test_gpu_tf32_emu> 64 4 100)
set_tests_properties(cuda_emu_test_gpu_tf32_default_report PROPERTIES FAIL_REGULAR_EXPRESSION "fallback")
# K = 1 convolutions on cuBLAS instead of cuDNN (SPKDDP_CONV1X1_GEMM=1, kernels/cuda/conv1d.cu):
# the conv1d test and the production-shape test against the CPU, in both orders.
foreach(t IN ITEMS "test_kernel_conv1d;cuda" "test_gpu_shapes;32;4;24")
  list(POP_FRONT t name)
  add_test(NAME cuda_emu_${name}_gemm1x1
           COMMAND ${CMAKE_COMMAND} -E env SPKDDP_CONV1X1_GEMM=1
                   bash ${CMAKE_CURRENT_SOURCE_DIR}/cuda_emu/run_both_orders.sh
                   ${CMAKE_CURRENT_BINARY_DIR}/work/cuda_emu_${name}_gemm1x1 $<TARGET_FILE:${name}_emu> ${t})
  set_tests_properties(cuda_emu_${name}_gemm1x1 PROPERTIES LABELS cuda-emu TIMEOUT 600)
endforeach()

# The stand-in's own checks: each misuse it claims to catch is caught (test_emu_detects.cu).
spk_emu_cuda_library(spk_cuda_emu_selftest ${CMAKE_CURRENT_LIST_DIR}/test_emu_detects.cu)
add_executable(test_emu_detects ${CMAKE_CURRENT_LIST_DIR}/test_emu_main.c)
target_link_libraries(test_emu_detects PRIVATE spk_cuda_emu_selftest)
set(_spk_emu_work ${CMAKE_CURRENT_BINARY_DIR}/work)
foreach(c ok race missing_wait)
  add_test(NAME cuda_emu_selftest_${c}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cuda_emu/run_both_orders.sh ${_spk_emu_work}/cuda_emu_selftest_${c}
                   $<TARGET_FILE:test_emu_detects> ${c})
endforeach()
# A race shows as different results in the two orders; a missing stream wait as stale data
# when work runs as late as possible (the forward order).
set_tests_properties(cuda_emu_selftest_race cuda_emu_selftest_missing_wait PROPERTIES WILL_FAIL TRUE)
set(_spk_emu_expect
  "host_pointer|argument 1: 0x[0-9a-f]+ is host memory, not device memory"
  "host_access|host code accessed device memory at 0x[0-9a-f]+ \\(12 bytes into the 64-byte allocation"
  "host_access_thread|host code accessed device memory at 0x[0-9a-f]+ \\(12 bytes into the 64-byte allocation"
  "divergent_barrier|64 of 128 threads exited while thread 0 waits at __syncthreads"
  "overrun|wrote past the end of the 400-byte allocation"
  "bad_config|2048 threads per block: cudaErrorInvalidConfiguration"
  "fresh_memory|fresh device memory reads -?nan"
  "fresh_shared|block 0 reads 1, block 1 reads -?nan"
  "cudnn_misuse|dilated FFT: CUDNN_STATUS_NOT_SUPPORTED, workspace [0-9]+ of [0-9]+ bytes: CUDNN_STATUS_BAD_PARAM"
  "pinned_overwrite|host code wrote pinned host memory at 0x[0-9a-f]+ \\(20 bytes into the 256-byte pinned block #1\\) while a queued cudaMemcpyAsync still reads it"
  "pinned_early_read|host code accessed pinned host memory at 0x[0-9a-f]+ \\(20 bytes into the 256-byte pinned block #1\\) while a queued cudaMemcpyAsync has yet to write it")
foreach(e ${_spk_emu_expect})
  string(REPLACE "|" ";" e "${e}")
  list(GET e 0 c)
  list(GET e 1 pattern)
  # The stand-in aborts on what it catches; the shell reports the abort as output, not a crash.
  add_test(NAME cuda_emu_selftest_${c} COMMAND sh -c "\"$0\" $1; exit 0" $<TARGET_FILE:test_emu_detects> ${c})
  set_tests_properties(cuda_emu_selftest_${c} PROPERTIES PASS_REGULAR_EXPRESSION "${pattern}")
endforeach()
# The same faults with mprotect, where the CPU or kernel has no memory protection keys.
foreach(c host_access host_access_thread)
  add_test(NAME cuda_emu_selftest_${c}_mprotect
           COMMAND sh -c "SPKDDP_CUDA_EMU_PKEYS=0 \"$0\" $1; exit 0" $<TARGET_FILE:test_emu_detects> ${c})
  set_tests_properties(cuda_emu_selftest_${c}_mprotect PROPERTIES PASS_REGULAR_EXPRESSION
                       "host code accessed device memory at 0x[0-9a-f]+ \\(12 bytes into the 64-byte allocation")
endforeach()

add_test(NAME cuda_emu_e2e_train
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cuda_emu/e2e_cuda_emu.sh $<TARGET_FILE:spkddp_emu> ${SPK_MPIEXEC}
                 ${_spk_emu_work}/cuda_emu_e2e_train)
set_tests_properties(cuda_emu_e2e_train PROPERTIES TIMEOUT 600)

# The CUDA backend as spkddp loads it, a module beside the program (kernels/cuda_module.h), against
# spkddp_emu, which links the same kernels.
add_test(NAME cuda_emu_e2e_module
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cuda_emu/e2e_cuda_emu_module.sh $<TARGET_FILE:spkddp_emu_module>
                 $<TARGET_FILE:spkddp_emu> ${SPK_MPIEXEC} ${_spk_emu_work}/cuda_emu_e2e_module)
set_tests_properties(cuda_emu_e2e_module PROPERTIES TIMEOUT 600)

# The GPU end-to-end test itself (gpu_e2e_cuda, tests/e2e/e2e_device.sh, with its tolerance) on
# two stand-in GPUs, with a smaller ECAPA than on a GPU.
add_test(NAME cuda_emu_e2e_device
         COMMAND ${CMAKE_COMMAND} -E env SPKDDP_CUDA_EMU_DEVICES=2
                 "E2E_DEVICE_MODEL=--channels 16 --attention-channels 8 --se-channels 8 --emb-dim 16 --frames 24"
                 bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/e2e_device.sh $<TARGET_FILE:spkddp_emu> ${SPK_MPIEXEC}
                 ${_spk_emu_work}/cuda_emu_e2e_device $<TARGET_FILE:make_bad_data> cuda 1e-5)
set_tests_properties(cuda_emu_e2e_device PROPERTIES TIMEOUT 600)

# cuDNN candidates are run before they are taken: a refused one gives way, nothing running is a
# sentence, SPKDDP_CUDNN_SEARCH=time times them (cudnn_choice.sh); the 2-D convolutions too.
add_test(NAME cuda_emu_cudnn_choice
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cuda_emu/cudnn_choice.sh $<TARGET_FILE:test_kernel_conv1d_emu>
                 ${_spk_emu_work}/cuda_emu_cudnn_choice $<TARGET_FILE:test_kernel_conv2d_emu>
                 $<TARGET_FILE:test_kernel_conv2d_bf16_emu>)

# A machine without a driver is a GPU-less machine (skipped); a driver older than the runtime
# is a failure naming both versions, in the device test and in `--device cuda`; `auto` says why
# it runs on the CPU.
add_test(NAME cuda_emu_no_driver
         COMMAND sh -c "SPKDDP_CUDA_EMU_DRIVER=none \"$0\"; test $? -eq 77" $<TARGET_FILE:test_gpu_device_emu>)
set_tests_properties(cuda_emu_no_driver PROPERTIES PASS_REGULAR_EXPRESSION "SKIPPED: no usable CUDA device: no CUDA driver is installed")
add_test(NAME cuda_emu_old_driver
         COMMAND sh -c "SPKDDP_CUDA_EMU_DRIVER=12.4 \"$0\"; test $? -eq 1" $<TARGET_FILE:test_gpu_device_emu>)
set_tests_properties(cuda_emu_old_driver PROPERTIES PASS_REGULAR_EXPRESSION
  "FAIL: the CUDA driver supports CUDA 12.4 but this spkddp was built with the CUDA 13.0 runtime")
add_test(NAME cuda_emu_old_driver_train
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cuda_emu/old_driver.sh $<TARGET_FILE:spkddp_emu> ${_spk_emu_work}/cuda_emu_old_driver_train)

# tools/gpu_check.sh, the one script a GPU machine runs, run through on the stand-in. Where the
# bundle test runs (tests/bundle/tests.cmake: with nvcc), its stand-in bundle runs the same script
# the way a GPU machine will, so this one would only repeat it.
if(NOT SPKDDP_CUDA OR SPKDDP_SANITIZE OR SPKDDP_FUZZ)
  add_test(NAME cuda_emu_gpu_check
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cuda_emu/gpu_check_emu.sh ${CMAKE_CURRENT_BINARY_DIR}
                   $<TARGET_FILE:spkddp_emu> ${_spk_emu_work}/cuda_emu_gpu_check)
  set_tests_properties(cuda_emu_gpu_check PROPERTIES TIMEOUT 1200)
endif()

get_property(_spk_tests DIRECTORY PROPERTY TESTS)
foreach(t ${_spk_tests})
  if(t MATCHES "^cuda_emu_")
    set_property(TEST ${t} APPEND PROPERTY LABELS cuda-emu)
  endif()
endforeach()
