// Whether this machine shows an NVIDIA GPU, from the file system alone (kernels/device.h).
#include "kernels/device.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

// A PCI device's hexadecimal sysfs attribute (vendor, class), or 0.
static unsigned pci_attr(const char *device, const char *name) {
    char path[600];
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/%s", device, name);
    unsigned v = 0;
    FILE *f = fopen(path, "r");
    if (f && fscanf(f, "%x", &v) != 1) v = 0;
    if (f) fclose(f);
    return v;
}

// An NVIDIA display or 3-D controller on the PCI bus (vendor 0x10de, class 0x03xxxx).
static int nvidia_gpu_on_bus(void) {
    DIR *d = opendir("/sys/bus/pci/devices");
    if (!d) return 0;
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d));)
        found = e->d_name[0] != '.' && pci_attr(e->d_name, "vendor") == 0x10de &&
                pci_attr(e->d_name, "class") >> 16 == 0x03;
    closedir(d);
    return found;
}

static int g_present;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void look(void) {
    g_present = nvidia_gpu_on_bus() || access("/dev/nvidiactl", F_OK) == 0 || access("/dev/dxg", F_OK) == 0;
}

int spk_nvidia_gpu_present(void) {
    pthread_once(&g_once, look);
    return g_present;
}
