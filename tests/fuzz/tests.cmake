# libFuzzer targets (-DSPKDDP_FUZZ=ON, clang): the dataset and checkpoint readers on files
# built from the input, utterance ids and trial lists, Kaldi data lists, safetensors files. Each runs as a ctest
# (label fuzz) for SPKDDP_FUZZ_SECONDS from the committed seeds in corpus/<target>; any crash,
# sanitizer report or broken reader promise fails it and leaves the input in the work folder.
if(SPKDDP_FUZZ)
  set(SPKDDP_FUZZ_SECONDS 60 CACHE STRING "seconds each fuzz target runs under ctest")
  set(spk_fuzz_targets fuzz_dataset fuzz_checkpoint fuzz_trials fuzz_safetensors)
  if(EXISTS ${CMAKE_SOURCE_DIR}/io/audio/kaldi_data.h)  # the Kaldi list reader of the streaming prepare
    list(APPEND spk_fuzz_targets fuzz_kaldi_data)
  endif()
  foreach(target ${spk_fuzz_targets})
    add_executable(${target} ${CMAKE_CURRENT_LIST_DIR}/${target}.c)
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer)
    target_link_options(${target} PRIVATE -fsanitize=fuzzer)
    target_link_libraries(${target} PRIVATE spk_io)
    add_test(NAME ${target} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_fuzz.sh $<TARGET_FILE:${target}>
      ${CMAKE_CURRENT_LIST_DIR}/corpus/${target} ${CMAKE_CURRENT_BINARY_DIR}/work/${target} ${SPKDDP_FUZZ_SECONDS})
    set_tests_properties(${target} PROPERTIES LABELS fuzz TIMEOUT 900)
  endforeach()
endif()
