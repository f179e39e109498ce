# Multi-node tests: each builds a small Slurm cluster of network namespaces on this machine
# (tests/multinode/cluster.sh: a login node with slurmctld, nodes with one slurmd each, joined
# by a bridge) and skips (exit 77) with the reason when Slurm is missing or namespaces cannot
# be made (not root, no veth/bridge). Run them with: ctest --test-dir build -L multinode
spk_test_binary(multinode node_probe)
foreach(name test_multinode_train test_multinode_requeue test_multinode_node_lost test_multinode_mpiexec)
  add_test(NAME ${name}
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/${name}.sh $<TARGET_FILE:spkddp> ${SPK_MPIEXEC}
      ${CMAKE_CURRENT_BINARY_DIR}/work/${name} $<TARGET_FILE:node_probe>)
  # One Slurm at a time, single-node or not: each takes both cores.
  set_tests_properties(${name} PROPERTIES LABELS multinode TIMEOUT 300 SKIP_RETURN_CODE 77
    RESOURCE_LOCK slurm_fixture)
endforeach()
