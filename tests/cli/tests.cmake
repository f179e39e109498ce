# cli/: the train config text stored in checkpoints, byte for byte as older versions wrote it.
spk_unit_test(cli test_train_options ${CMAKE_CURRENT_SOURCE_DIR}/cli/train_config_golden.txt)
# cli/: --config files: parsing, refusals with file:line and key, flags over the file, and the
# effective-config YAML reading back to the same config.
spk_unit_test(cli test_config_file ${CMAKE_CURRENT_BINARY_DIR})
