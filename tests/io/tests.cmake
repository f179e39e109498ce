# io/: sampler, parallel dataset reads, filterbanks against torchaudio's.
spk_unit_test(io test_sampler)
# Synthetic corpora: the default frames unchanged, --spectral ones smooth along the feature axis.
spk_unit_test(io test_synth)
spk_unit_test(io test_pictures)
spk_unit_test(io test_matrix_file)
spk_test_binary(io test_dataset_read)
spk_mpi_test(test_dataset_read 1 2 4)
# (test_fbank and test_augment write and decode audio with libsndfile: only with SPKDDP_MEDIA.)
if(SPKDDP_MEDIA)
  spk_unit_test(io test_fbank ${CMAKE_CURRENT_SOURCE_DIR}/golden/fbank_golden.h5)
  target_link_libraries(test_fbank PRIVATE PkgConfig::SNDFILE)
endif()
# Random-crop reads against the chunk layout (a benchmark, not a test: docs/dataset-format.md).
add_executable(bench_chunks ${CMAKE_CURRENT_SOURCE_DIR}/../tools/bench_chunks.c)
target_link_libraries(bench_chunks PRIVATE spk_io)
# Checkpoints: format, checksum coverage, layouts, format 1 fixtures, rotation, atomic writes.
spk_unit_test(io test_checkpoint ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/v1)
# Trial lists and utterance ids: accepted forms and each kind of bad list.
spk_unit_test(io test_trials)
# Kaldi lists: the optional ones given as NULL or "".
spk_unit_test(io test_kaldi_data)
# Files written by h5py (variable-length UTF-8 strings, int64 labels) read like our own.
spk_unit_test(io test_h5py_strings)
# Checkpoint directories end to end: rotation across a requeue, foreign and corrupt files,
# resuming an older checkpoint, a full disk, format 1 checkpoints resumed.
add_test(NAME ckpt_dir COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/ckpt_dir.sh $<TARGET_FILE:spkddp> ${SPK_MPIEXEC}
  ${CMAKE_CURRENT_BINARY_DIR}/work/ckpt_dir ${CMAKE_CURRENT_LIST_DIR}/../fixtures/v1)
set_tests_properties(ckpt_dir PROPERTIES LABELS "e2e;mpi" TIMEOUT 600)
# Augmentation: the signal processing and the flags (test_augment), and the loader's
# augmented samples on 1 and 2 ranks against a lone reader (test_augment_loader).
if(SPKDDP_MEDIA)
  spk_unit_test(io test_augment)
  target_link_libraries(test_augment PRIVATE PkgConfig::SNDFILE)
endif()
spk_test_binary(io test_augment_loader)
spk_mpi_test(test_augment_loader 1 2)
# Augmented samples per second on one core (a benchmark: tools/bench_augment.sh).
add_executable(bench_augment ${CMAKE_CURRENT_SOURCE_DIR}/../tools/bench_augment.c)
target_link_libraries(bench_augment PRIVATE spk_io)
# Export formats: safetensors layout and readers of malformed files; the ONNX builder's
# protobuf read back; checkpoint averaging on known numbers; npy and Kaldi ark bytes.
spk_unit_test(io test_safetensors)
spk_unit_test(io test_onnx_builder)
spk_unit_test(io test_ckpt_average)
spk_unit_test(io test_emb_formats)
