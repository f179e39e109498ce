# io/: sampler, parallel dataset reads, filterbanks against torchaudio's.
spk_unit_test(io test_sampler)
spk_test_binary(io test_dataset_read)
spk_mpi_test(test_dataset_read 1 2 4)
spk_unit_test(io test_fbank ${CMAKE_CURRENT_SOURCE_DIR}/golden/fbank_golden.h5)
# Random-crop reads against the chunk layout (a benchmark, not a test: docs/dataset-format.md).
add_executable(bench_chunks ${CMAKE_CURRENT_SOURCE_DIR}/../tools/bench_chunks.c)
target_link_libraries(bench_chunks PRIVATE spk_io)
