#include "config.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "diag.h"

namespace spk_emu {
namespace {

Config read_config() {
    Config c{false, 1, true, true, false, kRuntimeVersion, {0, 0, 0}};
    if (const char* o = getenv("SPKDDP_CUDA_EMU_ORDER"); o && o[0]) {
        if (strcmp(o, "reverse") == 0)
            c.reverse = true;
        else if (strcmp(o, "forward") != 0)
            fail("SPKDDP_CUDA_EMU_ORDER='%s' must be forward or reverse", o);
    }
    if (const char* d = getenv("SPKDDP_CUDA_EMU_DEVICES"); d && d[0]) {
        char* end = nullptr;
        const long n = strtol(d, &end, 10);
        if (*end || n < 0 || n > 64) fail("SPKDDP_CUDA_EMU_DEVICES='%s' must be a count from 0 to 64", d);
        c.devices = (int)n;
    }
    if (const char* p = getenv("SPKDDP_CUDA_EMU_PROTECT"); p && strcmp(p, "0") == 0) c.protect = false;
    if (const char* p = getenv("SPKDDP_CUDA_EMU_PKEYS"); p && strcmp(p, "0") == 0) c.pkeys = false;
    if (const char* r = getenv("SPKDDP_CUDA_EMU_CUDNN_REPORT"); r && r[0]) {
        if (strcmp(r, "default") == 0)
            c.cudnn_reports_default = true;
        else if (strcmp(r, "fma") != 0)
            fail("SPKDDP_CUDA_EMU_CUDNN_REPORT='%s' must be fma or default", r);
    }
    if (const char* v = getenv("SPKDDP_CUDA_EMU_DRIVER"); v && v[0]) {
        int major = 0, minor = 0;
        char end = 0;
        if (strcmp(v, "none") == 0)
            c.driver_version = 0;
        else if (sscanf(v, "%d.%d%c", &major, &minor, &end) == 2 && major > 0 && minor >= 0 && minor < 100)
            c.driver_version = 1000 * major + 10 * minor;
        else
            fail("SPKDDP_CUDA_EMU_DRIVER='%s' must be none or MAJOR.MINOR (e.g. 12.4)", v);
    }
    if (const char* r = getenv("SPKDDP_CUDA_EMU_CUDNN_REFUSE"); r && r[0]) {
        static const char* const passes[] = {"fwd", "bwd-data", "bwd-filter"};
        for (const char* item = r; *item;) {
            char pass[16] = "";
            int algo = -1, used = 0;
            if (sscanf(item, "%15[a-z-]:%d%n", pass, &algo, &used) != 2 || algo < 0 || algo > 31)
                fail("SPKDDP_CUDA_EMU_CUDNN_REFUSE='%s' must be a list of PASS:ALGO (fwd, bwd-data, bwd-filter)", r);
            int k = 0;
            while (k < 3 && strcmp(pass, passes[k]) != 0) k++;
            if (k == 3) fail("SPKDDP_CUDA_EMU_CUDNN_REFUSE: '%s' is not fwd, bwd-data or bwd-filter", pass);
            c.refused[k] |= 1u << algo;
            item += used;
            if (*item == ',') item++;
        }
    }
    return c;
}

}  // namespace

const Config& config() {
    static const Config c = read_config();
    return c;
}

}  // namespace spk_emu
