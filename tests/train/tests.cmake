# train/: learning-rate schedules.
spk_unit_test(train test_lr_schedule)
