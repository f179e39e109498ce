// NCCL (nccl.h) over MPI: a communicator is an MPI communicator split from MPI_COMM_WORLD by
// the unique id; an all-reduce is a collective operation on its stream that runs, when
// something waits for it, as MPI_Reduce to rank 0 and MPI_Bcast (every rank gets the same
// bits, as from NCCL's ring). Checks NCCL makes are made: ranks on one GPU ("Duplicate GPU"),
// buffers of another device, an aborted communicator.
//
// SPKDDP_CUDA_EMU_NCCL_FAULT=error:N or hang:N makes the N-th all-reduce of every rank never
// complete, with an asynchronous error (ncclRemoteError) or without one, to exercise a
// caller's error and timeout handling.
#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "device_memory.h"
#include "diag.h"
#include "nccl.h"
#include "runtime_state.h"
#include "streams.h"

struct ncclComm {
    MPI_Comm mpi = MPI_COMM_NULL;
    int rank = 0, nranks = 0, device = 0;
    bool aborted = false;
    ncclResult_t async_error = ncclSuccess;
};

namespace spk_emu {
namespace {

std::set<ncclComm*> g_comms;
// Aborted and destroyed communicators: kept, as queued operations may still name them.
std::set<ncclComm*>& g_retired = *new std::set<ncclComm*>;
long g_allreduces = 0;  // of this process, for the fault injection

struct Fault {
    bool error = false;
    long at = 0;  // 0: none
};

Fault fault() {
    static const Fault f = [] {
        Fault r;
        const char* s = getenv("SPKDDP_CUDA_EMU_NCCL_FAULT");
        if (!s || !s[0]) return r;
        char kind[16] = "";
        if (sscanf(s, "%15[a-z]:%ld", kind, &r.at) != 2 || r.at < 1 ||
            (strcmp(kind, "error") != 0 && strcmp(kind, "hang") != 0))
            fail("SPKDDP_CUDA_EMU_NCCL_FAULT='%s' must be error:N or hang:N (N >= 1)", s);
        r.error = strcmp(kind, "error") == 0;
        return r;
    }();
    return f;
}

ncclResult_t usage(const char* why) {
    note("%s", why);
    return ncclInvalidUsage;
}

uint32_t hash_id(const ncclUniqueId& id) {
    uint32_t h = 2166136261u;  // FNV-1a
    for (char c : id.internal) h = (h ^ (unsigned char)c) * 16777619u;
    return h & 0x7fffffff;
}

class AllReduceOp final : public Operation {
public:
    AllReduceOp(ncclComm* comm, const float* send, float* recv, size_t count, bool average, bool injected)
        : comm_(comm), send_(send), recv_(recv), count_(count), average_(average), injected_(injected) {}

    bool collective() const override { return true; }

    bool stalled() override {
        if (injected_ && fault().error && comm_->async_error == ncclSuccess) {
            comm_->async_error = ncclRemoteError;
            note("injected failure (SPKDDP_CUDA_EMU_NCCL_FAULT): all-reduce %ld of this rank never completes",
                 fault().at);
        }
        return injected_ && !comm_->aborted;
    }

    void run() override {
        if (comm_->aborted) return;  // ncclCommAbort dropped it
        if (send_ != recv_) memcpy(recv_, send_, count_ * sizeof(float));
        const int root = 0;
        for (size_t off = 0; off < count_;) {
            const int n = (int)(count_ - off < (size_t)1 << 30 ? count_ - off : (size_t)1 << 30);
            float* p = recv_ + off;
            if (comm_->rank == root)
                mpi(MPI_Reduce(MPI_IN_PLACE, p, n, MPI_FLOAT, MPI_SUM, root, comm_->mpi));
            else
                mpi(MPI_Reduce(p, nullptr, n, MPI_FLOAT, MPI_SUM, root, comm_->mpi));
            mpi(MPI_Bcast(p, n, MPI_FLOAT, root, comm_->mpi));
            off += (size_t)n;
        }
        if (average_) {
            const float inv = 1.0f / (float)comm_->nranks;
            for (size_t i = 0; i < count_; i++) recv_[i] *= inv;
        }
    }

private:
    static void mpi(int rc) {
        if (rc != MPI_SUCCESS) fail("MPI failed (code %d) inside the all-reduce", rc);
    }
    ncclComm* comm_;
    const float* send_;
    float* recv_;
    size_t count_;
    bool average_, injected_;
};

}  // namespace
}  // namespace spk_emu

using namespace spk_emu;

extern "C" {

const char* ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    }
    return "unknown result code";
}

const char* ncclGetLastError(ncclComm_t) { return last_note(); }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
    if (!id) return ncclInvalidArgument;
    memset(id, 0, sizeof *id);
    static unsigned counter = 0;
    snprintf(id->internal, sizeof id->internal, "cuda-emu %d %u %lx", (int)getpid(), ++counter,
             (unsigned long)(uintptr_t)id);
    return ncclSuccess;
}

// Collective over MPI_COMM_WORLD (every rank of the job must call it, as spkddp's do).
ncclResult_t ncclCommInitRank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank) {
    int mpi_up = 0;
    MPI_Initialized(&mpi_up);
    if (!out) return ncclInvalidArgument;
    if (!mpi_up) return usage("the stand-in's NCCL runs over MPI: MPI_Init first");
    if (nranks < 1 || rank < 0 || rank >= nranks) return usage("ncclCommInitRank: rank out of range");
    ncclComm* c = new ncclComm;
    c->rank = rank;
    c->nranks = nranks;
    c->device = current_device();
    MPI_Comm_split(MPI_COMM_WORLD, (int)hash_id(id), rank, &c->mpi);
    int size = 0, me = 0;
    MPI_Comm_size(c->mpi, &size);
    MPI_Comm_rank(c->mpi, &me);
    if (size != nranks || me != rank) {
        MPI_Comm_free(&c->mpi);
        delete c;
        return usage("ncclCommInitRank: the ranks that share this unique id are not nranks ranks");
    }
    std::vector<int> devices(nranks);
    MPI_Allgather(&c->device, 1, MPI_INT, devices.data(), 1, MPI_INT, c->mpi);
    for (int r = 0; r < nranks; r++)
        if (r != rank && devices[r] == c->device) {
            // NCCL: "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device ..."
            note("Duplicate GPU detected : rank %d and rank %d both on CUDA device %d", rank, r, c->device);
            MPI_Comm_free(&c->mpi);
            delete c;
            return ncclInvalidUsage;
        }
    g_comms.insert(c);
    *out = c;
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
    if (!g_comms.count(comm) || !async_error) return ncclInvalidArgument;
    *async_error = comm->async_error;
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    if (!g_comms.count(comm)) return ncclInvalidArgument;
    comm->aborted = true;  // queued all-reduces complete without communicating
    g_comms.erase(comm);
    g_retired.insert(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    if (!g_comms.count(comm)) return ncclInvalidArgument;
    synchronize_device();  // finishes its queued all-reduces (every rank destroys it)
    MPI_Comm_free(&comm->mpi);
    g_comms.erase(comm);
    g_retired.insert(comm);
    comm->aborted = true;
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    if (!g_comms.count(comm)) return usage("ncclAllReduce: not a communicator (aborted or destroyed?)");
    if (datatype != ncclFloat || (op != ncclSum && op != ncclAvg)) {
        note("ncclAllReduce: only float sum and average are emulated");
        return ncclInvalidArgument;
    }
    CUstream_st* s = stream_from_handle(stream);
    if (!s) return usage("ncclAllReduce: not a stream");
    if (count == 0) return ncclSuccess;
    for (const void* p : {(const void*)sendbuff, (const void*)recvbuff}) {
        char why[256];
        const Allocation* a = find_range(p, count * sizeof(float), why, sizeof why);
        if (!a) {
            note("ncclAllReduce: %s", why);
            return ncclInvalidArgument;
        }
        if (a->device != comm->device) return usage("ncclAllReduce: a buffer is memory of another device");
    }
    const bool injected = fault().at == ++g_allreduces;
    enqueue(s, std::make_unique<AllReduceOp>(comm, (const float*)sendbuff, (float*)recvbuff, count, op == ncclAvg,
                                             injected));
    return ncclSuccess;
}

}  // extern "C"
