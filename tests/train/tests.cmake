# train/: learning-rate schedules.
spk_unit_test(train test_lr_schedule)
# train/: step controls: gradient norm, clipping, skipped updates, the epoch's norm figures.
spk_unit_test(train test_step_controls)
