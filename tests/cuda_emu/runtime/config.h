// The stand-in's settings, read once from the environment:
//   SPKDDP_CUDA_EMU_ORDER=forward|reverse   scheduling order (default forward):
//       forward: blocks and threads in ascending order; queued work runs as late as it may,
//                when the host waits for it (only what that wait needs);
//       reverse: descending order; queued work runs as soon as it is queued (its waits
//                allowing; collectives still run only when something waits for them).
//     Both are schedules a GPU may produce: a correct program gives the same bits under both.
//   SPKDDP_CUDA_EMU_DEVICES=N   GPUs this process sees (default 1), with distinct PCI bus ids,
//     the same in every process, as on one node; ranks r and r' drive the same GPU when
//     r % N == r' % N.
//   SPKDDP_CUDA_EMU_PROTECT=0   leaves device memory readable by host code between device
//     operations (default: any host access to it faults with a message).
//   SPKDDP_CUDA_EMU_PKEYS=0   protects it with mprotect around each device operation even
//     where the CPU has memory protection keys (default: a key, far cheaper; the same faults).
//   SPKDDP_CUDA_EMU_CUDNN_REPORT=fma|default   how the cuDNN heuristics describe their results
//     (which real cuDNN versions do is not settled): fma (default) reports fp32 kernels as
//     CUDNN_FMA_MATH; default reports them as CUDNN_DEFAULT_MATH and the backward passes'
//     tensor-core kernels as non-deterministic.
//   SPKDDP_CUDA_EMU_DRIVER=none|MAJOR.MINOR   the CUDA version the driver supports (default
//     13.0, the runtime's): none is a machine without a driver library, an older version a
//     driver too old for the runtime; either way cudaGetDeviceCount fails as CUDA's does
//     (cudaErrorInsufficientDriver).
//   SPKDDP_CUDA_EMU_CUDNN_REFUSE=PASS:ALGO[,...]   convolution algorithms the heuristics offer
//     but that refuse to run (CUDNN_STATUS_EXECUTION_FAILED), PASS one of fwd, bwd-data,
//     bwd-filter and ALGO the algorithm's number, as cuDNN's kernels do on some shapes.
#pragma once

namespace spk_emu {

struct Config {
    bool reverse;
    int devices;
    bool protect;
    bool pkeys;
    bool cudnn_reports_default;
    int driver_version;   // CUDA's encoding, 1000 * major + 10 * minor; 0: no driver
    unsigned refused[3];  // per pass (forward, backward data, backward filter): bit a refuses algorithm a
};

// The CUDA version the stand-in's runtime implements.
constexpr int kRuntimeVersion = 13000;

const Config& config();

}  // namespace spk_emu
