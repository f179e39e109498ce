// Accelerator discovery. Built everywhere; without the CUDA backend every query answers
// "no device", so callers need no #ifdefs.
#pragma once
#include <stddef.h>

// Devices visible to this process (0 without CUDA or without a driver/GPU). `why` (may be
// NULL) receives a sentence when the answer is 0 because of an error.
int spk_device_count(char *why, size_t cap);
// Makes `index` the current device; 0 on success, else -1 with a sentence in `why`.
int spk_device_select(int index, char *why, size_t cap);
// The device's PCI bus id ("0000:3b:00.0"), the same in every process that sees the GPU
// whatever CUDA_VISIBLE_DEVICES numbers it as; 0 on success, else -1.
int spk_device_pci_id(int index, char *out, size_t cap);
// "NVIDIA H100 80GB HBM3 (sm_90, 79 GiB)" or "" when unknown.
void spk_device_describe(int index, char *out, size_t cap);
