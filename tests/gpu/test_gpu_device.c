// GPU smoke test: a device is visible, selectable and describes itself. Without one it
// reports SKIPPED (exit 77), never passed; a driver that cannot run this build (too old for its
// CUDA runtime) is a failure, with both versions.
#include "kernels/device.h"
#include "tests/test_util.h"

int main(void) {
    char why[256] = "", name[256] = "";
    int n = spk_device_count(why, sizeof why);
    if (n < 0) {
        printf("FAIL: %s\n", why);
        return 1;
    }
    if (n == 0) {
        printf("SKIPPED: %s\n", why);
        return 77;
    }
    for (int i = 0; i < n; i++) {
        EXPECT(spk_device_select(i, why, sizeof why) == 0, "select device %d: %s", i, why);
        spk_device_describe(i, name, sizeof name);
        EXPECT(name[0] != 0, "device %d has no description", i);
        printf("device %d: %s\n", i, name);
    }
    return test_report("test_gpu_device");
}
