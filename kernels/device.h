// Accelerator discovery. Built everywhere; without the CUDA backend every query answers
// "no device", so callers need no #ifdefs.
#pragma once
#include <stddef.h>

// Devices visible to this process (0 without CUDA or without a driver/GPU). `why` (may be
// NULL) receives a sentence when the answer is 0 because of an error.
int spk_device_count(char *why, size_t cap);
// Makes `index` the current device; 0 on success, else -1 with a sentence in `why`.
int spk_device_select(int index, char *why, size_t cap);
// "NVIDIA H100 80GB HBM3 (sm_90, 79 GiB)" or "" when unknown.
void spk_device_describe(int index, char *out, size_t cap);
