// Page-locked ("pinned") host memory from cudaMallocHost. Copies between it and the device are
// truly asynchronous: a host-to-device copy reads the host memory when it runs, a
// device-to-host copy writes it when it runs, so the host must wait (an event, the stream)
// before it writes a source again or reads a destination. While a queued copy still reads a
// block the stand-in makes it read-only, and while one has yet to write it, inaccessible (with
// SPKDDP_CUDA_EMU_PROTECT, on by default): host code that does not wait faults with a message
// naming the block, instead of racing the copy as it would on a GPU.
#pragma once
#include <cstddef>
#include <cstdint>

namespace spk_emu {

void* pinned_alloc(size_t bytes);  // nullptr when the system has no memory left
bool pinned_free(void* p);         // false: not the start of a live block
// True when [p, p + bytes) lies inside one live pinned block.
bool is_pinned(const void* p, size_t bytes);

// A queued copy will read (written = false) or write (written = true) the pinned range at p;
// it calls pinned_release with the same arguments once it ran.
void pinned_hold(const void* p, bool written);
void pinned_release(const void* p, bool written);

// While one exists, the pinned block holding p is accessible (a copy runs inside one).
class PinnedAccess {
public:
    explicit PinnedAccess(const void* p);
    ~PinnedAccess();
    PinnedAccess(const PinnedAccess&) = delete;
    PinnedAccess& operator=(const PinnedAccess&) = delete;

private:
    const void* p_;
};

// For the fault handler: a sentence about host code touching a held pinned block at `addr`,
// or false when addr is not in one.
bool pinned_fault_message(const void* addr, char* out, size_t cap);

}  // namespace spk_emu
