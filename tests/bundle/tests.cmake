# bundle/: the GPU bundle (tools/gpu_bundle.sh) built here and run as a GPU machine without our
# dependencies would run it: its size, that it needs from the host only what
# tools/bundle_host_libs.txt allows, its binaries in a stripped environment on the CPU, and its
# gpu_check.sh on the CUDA stand-in's twins (bundle_test.sh); then its library search against
# the cuBLAS/cuDNN/NCCL wheels PyTorch pins, in a venv (bundle_cuda_wheels.sh; skipped without
# PyPI). Needs nvcc (SPKDDP_CUDA) and a C++ compiler (the stand-in). Label bundle.
if(NOT SPKDDP_CUDA OR NOT SPKDDP_CUDA_EMU OR SPKDDP_SANITIZE OR SPKDDP_FUZZ)
  return()
endif()
set(_spk_bundle_work ${CMAKE_CURRENT_BINARY_DIR}/work/bundle)
add_test(NAME bundle COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/bundle/bundle_test.sh ${CMAKE_SOURCE_DIR} ${_spk_bundle_work}
                                 ${CMAKE_BINARY_DIR})
set_tests_properties(bundle PROPERTIES LABELS bundle TIMEOUT 2400 FIXTURES_SETUP spk_bundle)
add_test(NAME bundle_cuda_wheels
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/bundle/bundle_cuda_wheels.sh ${CMAKE_SOURCE_DIR} ${_spk_bundle_work}
                 ${CMAKE_BINARY_DIR}/cuda-wheels-venv)
set_tests_properties(bundle_cuda_wheels PROPERTIES LABELS bundle TIMEOUT 1200 SKIP_RETURN_CODE 77
                     FIXTURES_REQUIRED spk_bundle)
