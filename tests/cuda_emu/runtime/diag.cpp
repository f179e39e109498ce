#include "diag.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace spk_emu {
namespace {
char g_last_note[512];
}

void fail(const char* fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cuda-emu: error: %s\n", msg);
    fflush(stderr);
    abort();
}

void note(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_last_note, sizeof g_last_note, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cuda-emu: note: %s\n", g_last_note);
    fflush(stderr);
}

const char* last_note() { return g_last_note; }

}  // namespace spk_emu
