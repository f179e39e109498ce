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
//   SPKDDP_CUDA_EMU_CUDNN_REPORT=fma|default   how the cuDNN heuristics describe their results
//     (which real cuDNN versions do is not settled): fma (default) reports fp32 kernels as
//     CUDNN_FMA_MATH; default reports them as CUDNN_DEFAULT_MATH and the backward passes'
//     tensor-core kernels as non-deterministic.
#pragma once

namespace spk_emu {

struct Config {
    bool reverse;
    int devices;
    bool protect;
    bool cudnn_reports_default;
};

const Config& config();

}  // namespace spk_emu
