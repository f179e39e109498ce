// Runs one case of test_emu_detects.cu: test_emu_detects CASE.
#include <stdio.h>

int emu_selftest(const char* what);

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_emu_detects CASE\n");
        return 2;
    }
    return emu_selftest(argv[1]);
}
