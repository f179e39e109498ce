// How the stand-in reports what a GPU would not survive (a host pointer in a kernel, a
// divergent barrier, an out-of-bounds copy): one line "cuda-emu: error: ..." on stderr and
// abort(), so mpiexec ends the job. Errors that CUDA reports as status codes are returned as
// such, with the detail kept for the library's "last error" string and printed as a note.
#pragma once
#include <cstddef>

namespace spk_emu {

[[noreturn]] void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Prints "cuda-emu: note: ..." (the explanation behind an error status about to be returned)
// and keeps it for cudnnGetLastErrorString / ncclGetLastError.
void note(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
const char* last_note();

}  // namespace spk_emu
