// SPKDDP_CUDA_EMU_DIGEST=FILE: a running hash of every byte device work hands to the host
// (device-to-host copies, in order), written to FILE at exit as "<hash> <bytes>". Two runs
// of a program under the two scheduling orders must write the same line.
#pragma once
#include <cstddef>

namespace spk_emu {

void digest_add(const void* p, size_t bytes);

}  // namespace spk_emu
