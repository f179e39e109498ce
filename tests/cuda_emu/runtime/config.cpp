#include "config.h"

#include <cstdlib>
#include <cstring>

#include "diag.h"

namespace spk_emu {
namespace {

Config read_config() {
    Config c{false, 1, true, false};
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
    if (const char* r = getenv("SPKDDP_CUDA_EMU_CUDNN_REPORT"); r && r[0]) {
        if (strcmp(r, "default") == 0)
            c.cudnn_reports_default = true;
        else if (strcmp(r, "fma") != 0)
            fail("SPKDDP_CUDA_EMU_CUDNN_REPORT='%s' must be fma or default", r);
    }
    return c;
}

}  // namespace

const Config& config() {
    static const Config c = read_config();
    return c;
}

}  // namespace spk_emu
