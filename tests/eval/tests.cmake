# eval/: EER, minDCF and AS-norm on known numbers.
spk_unit_test(eval test_scoring)
# eval/: scores, EER, minDCF, DET table, S-norm/AS-norm, Cllr/minCllr and calibration against
# the independent NumPy reference (tests/eval/make_scoring_reference.py), within 1e-6.
spk_unit_test(eval test_scoring_reference ${CMAKE_CURRENT_SOURCE_DIR}/eval/scoring_reference.txt)
