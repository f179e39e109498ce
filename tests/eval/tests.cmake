# eval/: EER, minDCF and AS-norm on known numbers.
spk_unit_test(eval test_scoring)
