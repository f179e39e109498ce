// The files a command writes, checked before it does any work: none may be one of the files it
// reads (or another of its outputs), and each one's folder must exist, so that a run neither
// destroys its own input nor fails after its work with nothing written.
// Files are compared by device and inode, so another spelling of a path (./a, a symbolic or a
// hard link) is caught too; an output that does not exist yet is compared by its folder and name.
#pragma once

typedef struct {
    const char *flag;  // "--out": how the message names it
    const char *path;  // NULL or "": not given
} path_arg_t;

// Ends the job (spk_fail_all, SPK_EXIT_USAGE: every rank reaches the same verdict) with one line
// naming the command, the output and the input it would replace, or the missing folder.
void out_paths_check(const char *command, const path_arg_t *outs, int n_outs, const path_arg_t *ins, int n_ins);
// The same without the folders: outputs whose folder the command makes itself (train's logs in
// its --ckpt-dir).
void out_paths_check_files(const char *command, const path_arg_t *outs, int n_outs, const path_arg_t *ins, int n_ins);

// Whether a and b name the same file (or, where either does not exist, the same folder entry).
int out_paths_same(const char *a, const char *b);
// Whether `path` lies directly in `folder` (which need not exist yet).
int out_paths_in_folder(const char *path, const char *folder);
