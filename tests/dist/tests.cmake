# dist/: cross-rank exact sums on 1, 2 and 4 ranks.
spk_test_binary(dist test_exact_reduce)
spk_mpi_test(test_exact_reduce 1 2 3 4 8)
# dist/: the classifier sharded across 1-4 ranks against the replicated one.
spk_test_binary(dist test_sharded_head)
spk_mpi_test(test_sharded_head 1 2 3 4)
# dist/: contrastive losses over the global batch on 1-4 ranks against one process.
spk_test_binary(dist test_contrastive_head)
spk_mpi_test(test_contrastive_head 1 2 3 4)
