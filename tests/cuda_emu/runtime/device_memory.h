// Device memory: one reserved address range (the "arena") that only device work may touch.
// cudaMalloc carves 256-byte aligned blocks out of it, each followed by a redzone; fresh and
// freed memory is filled with 0xFF bytes (NaN as floats, -1 as ints), so reading memory
// nobody wrote shows up in results. Between device operations the arena is inaccessible
// (SPKDDP_CUDA_EMU_PROTECT, on by default; through a protection key where the CPU has them,
// SPKDDP_CUDA_EMU_PKEYS=0 for mprotect): host code that dereferences a device pointer faults
// with a message, as it would on a GPU. Every pointer handed to a copy, a kernel or a
// library call is looked up here.
#pragma once
#include <cstddef>
#include <cstdint>

namespace spk_emu {

struct Allocation {
    uintptr_t base;
    size_t bytes;     // as requested
    int device;       // the device current at cudaMalloc
    uint64_t serial;  // n-th allocation of the process, for messages
};

void* device_alloc(size_t bytes, int device);  // nullptr when the arena is full
bool device_free(void* p);                     // false: not the start of a live allocation
size_t device_bytes_in_use();
size_t device_bytes_total();

bool in_arena(const void* p);
// The live allocation holding p (base <= p < base + bytes), or nullptr.
const Allocation* find_allocation(const void* p);
// The allocation holding [p, p + bytes), or nullptr with a sentence in `why` saying what is
// wrong (host memory, freed or unallocated device memory, past the end).
const Allocation* find_range(const void* p, size_t bytes, char* why, size_t cap);
// As find_range, but a failure ends the process: "<what>: <why>".
const Allocation& require_range(const void* p, size_t bytes, const char* what);
// Gives the whole pages inside [p, p + bytes) back to the system (they read as zeros after):
// for scratch only a library reads, so that protecting device memory stays cheap.
void device_discard(void* p, size_t bytes);
// The SIGSEGV handler that turns host accesses to protected memory (device memory, pinned
// memory a queued copy holds) into a message; installed once, when protection is on.
void install_fault_handler();
// Fails naming `after` if device work wrote into the redzone behind `a`.
void check_redzone(const Allocation& a, const char* after);

// While one exists, device memory is accessible (device operations run inside one).
class DeviceAccess {
public:
    DeviceAccess();
    ~DeviceAccess();
    DeviceAccess(const DeviceAccess&) = delete;
    DeviceAccess& operator=(const DeviceAccess&) = delete;
};

}  // namespace spk_emu
