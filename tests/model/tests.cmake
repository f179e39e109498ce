# model/: ECAPA-TDNN against PyTorch's (golden file) and finite differences.
spk_unit_test(model test_ecapa_golden ${CMAKE_CURRENT_SOURCE_DIR}/golden/ecapa_golden.h5)
spk_unit_test(model test_ecapa_model)
# Tiny networks: one thread, so a busy machine's spinning thread pools cannot stall them.
set_tests_properties(test_ecapa_model PROPERTIES ENVIRONMENT OMP_NUM_THREADS=1)
