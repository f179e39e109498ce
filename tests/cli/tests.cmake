# cli/: the train config text stored in checkpoints, byte for byte as older versions wrote it.
spk_unit_test(cli test_train_options ${CMAKE_CURRENT_SOURCE_DIR}/cli/train_config_golden.txt)
