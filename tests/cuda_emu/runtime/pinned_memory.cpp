#include "pinned_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>

#include "config.h"
#include "device_memory.h"
#include "diag.h"

namespace spk_emu {
namespace {

struct Block {
    uintptr_t base;
    size_t bytes, mapped;  // as requested; whole pages
    uint64_t serial;
    int readers = 0, writers = 0;  // queued copies that read / write it
    int access = 0;                // copies running on it now
};

std::map<uintptr_t, Block>& g_blocks = *new std::map<uintptr_t, Block>;
uint64_t g_serial = 0;

Block* block_of(const void* p) {
    const uintptr_t a = (uintptr_t)p;
    auto it = g_blocks.upper_bound(a);
    if (it == g_blocks.begin()) return nullptr;
    Block& b = std::prev(it)->second;
    return a < b.base + b.mapped ? &b : nullptr;
}

// What host code may do with the block now: anything, read only (a copy still reads it) or
// nothing (a copy has yet to write it).
void protect(const Block& b) {
    if (!config().protect) return;
    const int prot = b.access || (!b.readers && !b.writers) ? PROT_READ | PROT_WRITE
                     : b.writers                            ? PROT_NONE
                                                            : PROT_READ;
    if (mprotect((void*)b.base, b.mapped, prot) != 0) fail("mprotect of pinned memory failed: %s", strerror(errno));
}

Block& require_block(const void* p, const char* what) {
    Block* b = block_of(p);
    if (!b) fail("%s: %p is not pinned host memory", what, p);
    return *b;
}

}  // namespace

void* pinned_alloc(size_t bytes) {
    install_fault_handler();
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t mapped = (bytes + page - 1) / page * page;
    void* p = mmap(nullptr, mapped ? mapped : page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    Block b{(uintptr_t)p, bytes, mapped ? mapped : page, ++g_serial};
    g_blocks[b.base] = b;
    return p;
}

bool pinned_free(void* p) {
    auto it = g_blocks.find((uintptr_t)p);
    if (it == g_blocks.end()) return false;
    if (it->second.readers || it->second.writers)
        fail(
            "cudaFreeHost(%p): a queued copy still uses the block (cudaFreeHost waited for the device, so this is "
            "the stand-in's own bookkeeping failing)",
            p);
    munmap(p, it->second.mapped);
    g_blocks.erase(it);
    return true;
}

bool is_pinned(const void* p, size_t bytes) {
    const Block* b = block_of(p);
    return b && (uintptr_t)p + bytes <= b->base + b->bytes;
}

void pinned_hold(const void* p, bool written) {
    Block& b = require_block(p, "pinned_hold");
    (written ? b.writers : b.readers)++;
    protect(b);
}

void pinned_release(const void* p, bool written) {
    Block& b = require_block(p, "pinned_release");
    (written ? b.writers : b.readers)--;
    protect(b);
}

PinnedAccess::PinnedAccess(const void* p) : p_(p) {
    Block& b = require_block(p, "PinnedAccess");
    b.access++;
    protect(b);
}

PinnedAccess::~PinnedAccess() {
    Block& b = require_block(p_, "PinnedAccess");
    b.access--;
    protect(b);
}

bool pinned_fault_message(const void* addr, char* out, size_t cap) {
    const Block* b = block_of(addr);
    if (!b || (!b->readers && !b->writers)) return false;
    snprintf(out, cap,
             "cuda-emu: error: host code %s pinned host memory at %p (%zu bytes into the %zu-byte pinned block #%llu) "
             "while a queued cudaMemcpyAsync %s it; on a GPU this races the copy: wait for the copy (an event or the "
             "stream) first\n",
             b->writers ? "accessed" : "wrote", addr, (size_t)((uintptr_t)addr - b->base), b->bytes,
             (unsigned long long)b->serial, b->writers ? "has yet to write" : "still reads");
    return true;
}

}  // namespace spk_emu
