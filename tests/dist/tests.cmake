# dist/: cross-rank exact sums on 1, 2 and 4 ranks.
spk_test_binary(dist test_exact_reduce)
spk_mpi_test(test_exact_reduce 1 2 4)
