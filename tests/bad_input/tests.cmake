# The bad-input battery: malformed datasets, checkpoints, embeddings, trial and Kaldi lists,
# and flag values (cases.txt), each run at 1 and 2 ranks (run_battery.sh says what is checked).
add_executable(make_bad_inputs ${CMAKE_CURRENT_LIST_DIR}/make_bad_inputs.c)
target_link_libraries(make_bad_inputs PRIVATE spk_io)
foreach(np 1 2)
  add_test(NAME bad_input_np${np} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_battery.sh $<TARGET_FILE:spkddp> ${SPK_MPIEXEC}
    ${CMAKE_CURRENT_BINARY_DIR}/work/bad_input_np${np} $<TARGET_FILE:make_bad_inputs> ${np}
    ${CMAKE_CURRENT_LIST_DIR}/cases.txt ${CMAKE_CURRENT_LIST_DIR}/../golden ${CMAKE_CURRENT_LIST_DIR}/../fixtures/v1)
  set_tests_properties(bad_input_np${np} PROPERTIES LABELS "bad_input;mpi" TIMEOUT 900)
endforeach()
