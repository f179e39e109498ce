# Slurm tests: each starts its own single-node Slurm (tests/slurm/slurm_fixture.sh) from the
# Debian packages that tools/install-slurm.sh installs, and skips (exit 77) with the reason
# when Slurm is not installed or cannot start. Included from tests/CMakeLists.txt:
#   include(${CMAKE_CURRENT_SOURCE_DIR}/slurm/tests.cmake)
# Run them alone with: ctest --test-dir build -L slurm --output-on-failure
foreach(name test_slurm_requeue test_slurm_scancel test_slurm_killed_task)
  add_test(NAME ${name}
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/${name}.sh $<TARGET_FILE:spkddp> ${MPIEXEC_EXECUTABLE}
      ${CMAKE_CURRENT_BINARY_DIR}/work/${name})
  # One Slurm at a time: each takes both cores of its node.
  set_tests_properties(${name} PROPERTIES LABELS slurm TIMEOUT 300 SKIP_RETURN_CODE 77
    RESOURCE_LOCK slurm_fixture)
endforeach()
