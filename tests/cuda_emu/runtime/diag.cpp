#include "diag.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace spk_emu {
namespace {
char g_last_note[512];

void say(const char* kind, char* msg, size_t cap, const char* fmt, va_list ap) {
    vsnprintf(msg, cap, fmt, ap);
    fprintf(stderr, "cuda-emu: %s: %s\n", kind, msg);
    fflush(stderr);
}

}  // namespace

void fail(const char* fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    say("error", msg, sizeof msg, fmt, ap);
    va_end(ap);
    abort();
}

void note(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    say("note", g_last_note, sizeof g_last_note, fmt, ap);
    va_end(ap);
}

const char* last_note() { return g_last_note; }

}  // namespace spk_emu
