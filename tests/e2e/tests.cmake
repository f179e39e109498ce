# End-to-end shell tests: each gets the spkddp binary, mpiexec, its own work folder and the
# malformed-dataset writer.
add_executable(make_bad_data ${CMAKE_CURRENT_LIST_DIR}/make_bad_data.c)
target_link_libraries(make_bad_data PRIVATE spk_io)
# Noise and impulse-response banks and corrupted test sets for the augmentation tests (they
# write WAV files with libsndfile: only with SPKDDP_MEDIA).
if(SPKDDP_MEDIA)
  add_executable(make_aug_data ${CMAKE_CURRENT_LIST_DIR}/make_aug_data.c)
  target_link_libraries(make_aug_data PRIVATE spk_io PkgConfig::SNDFILE)
  # Synthetic talking-face mp4s of a speech corpus (they need the ffmpeg command-line tool).
  add_executable(make_face_video ${CMAKE_CURRENT_LIST_DIR}/make_face_video.c)
  target_link_libraries(make_face_video PRIVATE spk_io PkgConfig::SNDFILE)
endif()

function(spk_e2e_test name)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/work/${name})
  add_test(NAME ${name} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/${name}.sh $<TARGET_FILE:spkddp> ${SPK_MPIEXEC} ${dir}
    $<TARGET_FILE:make_bad_data>)
  set_tests_properties(${name} PROPERTIES LABELS "e2e;mpi" TIMEOUT 600)
endfunction()
# The thread count of runs (e2e_threads.sh), by an LD_PRELOAD shim: not under the sanitizers,
# whose runtime must load first.
if(NOT SPKDDP_SANITIZE)
  add_library(count_threads MODULE ${CMAKE_CURRENT_LIST_DIR}/count_threads.c)
  target_link_libraries(count_threads PRIVATE ${CMAKE_DL_LIBS})
  add_test(NAME e2e_threads COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/e2e_threads.sh $<TARGET_FILE:spkddp>
    ${SPK_MPIEXEC} ${CMAKE_CURRENT_BINARY_DIR}/work/e2e_threads $<TARGET_FILE:make_bad_data>
    $<TARGET_FILE:count_threads>)
  set_tests_properties(e2e_threads PROPERTIES LABELS "e2e;stress" TIMEOUT 600)
endif()
spk_e2e_test(e2e_ddp_identity)
spk_e2e_test(e2e_resume)
spk_e2e_test(e2e_bad_input)
spk_e2e_test(e2e_ecapa_train)
spk_e2e_test(e2e_resnet_train)
spk_e2e_test(e2e_campplus_train)
spk_e2e_test(e2e_verify)
spk_e2e_test(e2e_prepare)
spk_e2e_test(e2e_prepare_inputs)
spk_e2e_test(e2e_audio_dataset)
spk_e2e_test(e2e_audio_verify)
spk_e2e_test(e2e_bf16)
spk_e2e_test(e2e_augment)
if(SPKDDP_MEDIA)
  spk_e2e_test(e2e_signals)
  set_tests_properties(e2e_signals PROPERTIES LABELS "e2e;mpi;stress")
  spk_e2e_test(e2e_voxceleb_recipe)
  spk_e2e_test(e2e_video)
endif()
spk_e2e_test(e2e_augment_verify)
spk_e2e_test(e2e_invariant)
spk_e2e_test(e2e_invariant_bf16)
spk_e2e_test(e2e_invariant_bn)
add_test(NAME e2e_install COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/e2e_install.sh ${CMAKE_BINARY_DIR}
  ${CMAKE_CURRENT_BINARY_DIR}/work/e2e_install)
set_tests_properties(e2e_install PROPERTIES LABELS "e2e" TIMEOUT 300)
if(SPKDDP_CUDA)  # spkddp and its CUDA module (kernels/cuda_module.h)
  spk_e2e_test(e2e_cuda_module)
  set_tests_properties(e2e_cuda_module PROPERTIES LABELS "e2e")
endif()

# The device code path against the CPU path (e2e/e2e_device.sh): cpu-staged runs it on any
# machine and must be bitwise equal; the cuda variant is in gpu/tests.cmake.
function(spk_device_test name device rtol labels)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/work/${name})
  add_test(NAME ${name} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/e2e_device.sh $<TARGET_FILE:spkddp> ${SPK_MPIEXEC} ${dir}
    $<TARGET_FILE:make_bad_data> ${device} ${rtol})
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT 600 SKIP_RETURN_CODE 77)
endfunction()
spk_device_test(e2e_device_staged cpu-staged 0 "e2e;mpi")
spk_e2e_test(e2e_recipes)
spk_e2e_test(e2e_step_controls)
spk_e2e_test(e2e_init_from)
spk_e2e_test(e2e_sharded_head)
spk_e2e_test(e2e_dino)
spk_e2e_test(e2e_contrastive)

# tools/chaos.sh: eight random SIGKILLs, each followed by a bitwise resume -- enough to catch a
# failure that comes once in three kills 96% of the time (the measured runs, 20+ kills, are in
# docs/hardening.md). A failed trial's logs stay in the work folder.
add_test(NAME e2e_chaos COMMAND env SPKDDP=$<TARGET_FILE:spkddp> MPIEXEC=${SPK_MPIEXEC}
  WORK=${CMAKE_CURRENT_BINARY_DIR}/work/e2e_chaos bash ${CMAKE_SOURCE_DIR}/tools/chaos.sh 8 linear)
set_tests_properties(e2e_chaos PROPERTIES LABELS "e2e;mpi" TIMEOUT 300)
