// spkddp --version: the program's version, then what it runs on, one line per floor, for bug
// reports and for checking an installation (CUDA: whether the module loads).
#include "app/cli/commands.h"
#include "io/audio/audio.h"
#include "io/audio/fbank.h"
#include "io/common/h5util.h"
#include "kernels/base/check.h"
#include "kernels/cpu_libraries.h"
#include "kernels/device.h"

int cmd_version(const comm_t *comm, int argc, char **argv) {
    (void)comm, (void)argc, (void)argv;
    char cuda[512], cpu[256], mpi[256], h5[64], audio[384];
    spk_device_libraries(cuda, sizeof cuda);
    spk_cpu_libraries(cpu, sizeof cpu);
    comm_library(mpi, sizeof mpi);
    h5_library(h5, sizeof h5);
    audio_libraries(audio, sizeof audio);
    printf0("spkddp %s\nCUDA: %s\nCPU: %s\nMPI: %s\nI/O: %s; %s; audio: %s\n", SPKDDP_VERSION, cuda, cpu, mpi, h5,
            fbank_fft_library(), audio);
    return SPK_EXIT_OK;
}
