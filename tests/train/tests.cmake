# train/: learning-rate schedules.
spk_unit_test(train test_lr_schedule)
# train/: step controls: gradient norm, clipping, skipped updates, the epoch's norm figures.
spk_unit_test(train test_step_controls)
# How a run stops: signals at start-up, with a stopped peer, a silent peer, in a healthy run.
add_test(NAME train_stop COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/stop.sh $<TARGET_FILE:spkddp> ${SPK_MPIEXEC}
  ${CMAKE_CURRENT_BINARY_DIR}/work/train_stop)
set_tests_properties(train_stop PROPERTIES LABELS "e2e;mpi" TIMEOUT 300)
