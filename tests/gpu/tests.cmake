# What only a GPU can check; every op's CUDA kernel against the CPU kernel is kernel_<op>_cuda
# (tests/kernels/tests.cmake). Without a visible device these print SKIPPED and exit 77, which
# ctest reports as skipped (never as passed). On a GPU machine:
#   ctest -L gpu --output-on-failure      (or tools/gpu_check.sh)
# test_gpu_device: discovery; test_gpu_tf32: --tf32 math reaches every convolution pass;
# test_gpu_conv_plans: the cuDNN plan cache; test_gpu_shapes: every op at ECAPA's production
# shapes (C=1024, batch 128, T=200) against the CPU, and run twice; test_gpu_invariant2d: the
# invariant mode's 2-D ops at ResNet's shapes (a sample alone as in the batch, split batches,
# groups); gpu_e2e_cuda: training, cross-device resume and embeddings against the CPU
# (tests/e2e/e2e_device.sh).
foreach(t test_gpu_device test_gpu_tf32 test_gpu_conv_plans test_gpu_shapes test_gpu_invariant2d)
  spk_test_binary(gpu ${t})
  add_test(NAME ${t} COMMAND ${t})
  set_tests_properties(${t} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 900)
endforeach()

spk_device_test(gpu_e2e_cuda cuda 1e-5 "gpu;mpi")
