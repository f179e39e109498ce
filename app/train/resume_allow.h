// The names of what a resume compares, which --resume-allow may list (app/train/resume_allow.c):
// the flags of the trajectory as a checkpoint's config stores them, and what is checked from
// its header. Below both the resume check (app/train/resume.h) and the training config that
// checks --resume-allow (app/train/train_config.h), which includes no part of either.
#pragma once
#include <stddef.h>

#define RESUME_NAME_MAX 512  // the longest --resume-allow (a training config string field)

// The flags (as stored in the checkpoint's config) that change what the next step computes.
extern const char *const resume_trajectory[];
extern const size_t resume_trajectory_count;
// Checked from the checkpoint's header rather than its config text.
extern const char *const resume_header[];
extern const size_t resume_header_count;

// --resume-allow's names (comma-separated): global-batch, optimizer, data, and the
// trajectory flags. 0, or -1 with a sentence in err naming the unknown one.
int resume_allow_check(const char *list, char *err, size_t cap);
