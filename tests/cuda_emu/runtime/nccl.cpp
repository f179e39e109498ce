// NCCL (nccl.h) over MPI: a communicator is an MPI communicator split from MPI_COMM_WORLD by
// the unique id; an all-reduce is a collective operation on its stream that runs, when
// something waits for it, as MPI_Reduce to rank 0 and MPI_Bcast (every rank gets the same
// bits, as from NCCL's ring). Checks NCCL makes are made: ranks on one GPU ("Duplicate GPU"),
// buffers of another device, an aborted communicator.
//
// SPKDDP_CUDA_EMU_NCCL_FAULT=error:N or hang:N makes the N-th all-reduce of every rank never
// complete, with an asynchronous error (ncclRemoteError) or without one, to exercise a
// caller's error and timeout handling; =init-hang keeps a non-blocking communicator's set-up
// in progress forever (a peer that never joins). A non-blocking set-up otherwise completes on
// the third poll, so a caller that does not poll is caught using a communicator in progress.
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
    int setup_polls = 0;  // non-blocking set-up: polls left until it completes (-1: never)
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
    bool init_hang = false;
};

Fault fault() {
    static const Fault f = [] {
        Fault r;
        const char* s = getenv("SPKDDP_CUDA_EMU_NCCL_FAULT");
        if (!s || !s[0]) return r;
        if (strcmp(s, "init-hang") == 0) {
            r.init_hang = true;
            return r;
        }
        char kind[16] = "";
        if (sscanf(s, "%15[a-z]:%ld", kind, &r.at) != 2 || r.at < 1 ||
            (strcmp(kind, "error") != 0 && strcmp(kind, "hang") != 0))
            fail("SPKDDP_CUDA_EMU_NCCL_FAULT='%s' must be error:N, hang:N (N >= 1) or init-hang", s);
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

// What an all-reduce adds up: MPI's name for it, its size, and whether NCCL averages.
struct Reduction {
    MPI_Datatype type;
    MPI_Op op;
    size_t size;
    bool average;
};

class AllReduceOp final : public Operation {
public:
    AllReduceOp(ncclComm* comm, const void* send, void* recv, size_t count, Reduction red, bool injected)
        : comm_(comm), send_(send), recv_((char*)recv), count_(count), red_(red), injected_(injected) {}

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
        if (send_ != recv_) memcpy(recv_, send_, count_ * red_.size);
        const int root = 0;
        for (size_t off = 0; off < count_;) {
            const int n = (int)(count_ - off < (size_t)1 << 30 ? count_ - off : (size_t)1 << 30);
            char* p = recv_ + off * red_.size;
            if (comm_->rank == root)
                mpi(MPI_Reduce(MPI_IN_PLACE, p, n, red_.type, red_.op, root, comm_->mpi));
            else
                mpi(MPI_Reduce(p, nullptr, n, red_.type, red_.op, root, comm_->mpi));
            mpi(MPI_Bcast(p, n, red_.type, root, comm_->mpi));
            off += (size_t)n;
        }
        if (red_.average) {
            float* f = (float*)recv_;
            const float inv = 1.0f / (float)comm_->nranks;
            for (size_t i = 0; i < count_; i++) f[i] *= inv;
        }
    }

private:
    static void mpi(int rc) {
        if (rc != MPI_SUCCESS) fail("MPI failed (code %d) inside the all-reduce", rc);
    }
    ncclComm* comm_;
    const void* send_;
    char* recv_;
    size_t count_;
    Reduction red_;
    bool injected_;
};

// All-gather (every rank's count floats into recv in rank order) or reduce-scatter (block
// `rank` of the float sum over ranks of send, count floats each) over MPI.
class BatchOp final : public Operation {
public:
    BatchOp(ncclComm* comm, const void* send, void* recv, size_t count, bool gather)
        : comm_(comm), send_((const float*)send), recv_((float*)recv), count_(count), gather_(gather) {}

    bool collective() const override { return true; }
    bool stalled() override { return false; }

    void run() override {
        if (comm_->aborted) return;
        if (count_ > (size_t)1 << 30) fail("the stand-in's NCCL moves at most 2^30 floats per rank in one call");
        const int n = (int)count_;
        int rc = gather_ ? MPI_Allgather(send_, n, MPI_FLOAT, recv_, n, MPI_FLOAT, comm_->mpi)
                         : MPI_Reduce_scatter_block(send_, recv_, n, MPI_FLOAT, MPI_SUM, comm_->mpi);
        if (rc != MPI_SUCCESS)
            fail("MPI failed (code %d) inside the %s", rc, gather_ ? "all-gather" : "reduce-scatter");
    }

private:
    ncclComm* comm_;
    const float* send_;
    float* recv_;
    size_t count_;
    bool gather_;
};

// One ncclSend or ncclRecv: bytes to or from rank peer.
struct Transfer {
    void* buf;
    size_t bytes;
    int peer;
    bool send;
};

// A group's sends and receives, posted together over MPI when the stream reaches them (one tag:
// MPI keeps the order of a pair's messages, and every rank runs its groups in the order made).
class P2POp final : public Operation {
public:
    P2POp(ncclComm* comm, std::vector<Transfer> t) : comm_(comm), t_(std::move(t)) {}

    bool collective() const override { return true; }
    bool stalled() override { return false; }

    void run() override {
        if (comm_->aborted) return;
        std::vector<MPI_Request> req(t_.size());
        for (size_t i = 0; i < t_.size(); i++) {
            const Transfer& x = t_[i];
            if (x.bytes > (size_t)1 << 30) fail("the stand-in's NCCL moves at most 2^30 bytes in one send or receive");
            const int rc = x.send ? MPI_Isend(x.buf, (int)x.bytes, MPI_BYTE, x.peer, 7, comm_->mpi, &req[i])
                                  : MPI_Irecv(x.buf, (int)x.bytes, MPI_BYTE, x.peer, 7, comm_->mpi, &req[i]);
            if (rc != MPI_SUCCESS) fail("MPI failed (code %d) posting an ncclSend/ncclRecv", rc);
        }
        if (MPI_Waitall((int)req.size(), req.data(), MPI_STATUSES_IGNORE) != MPI_SUCCESS)
            fail("MPI failed inside a group of ncclSend/ncclRecv");
    }

private:
    ncclComm* comm_;
    std::vector<Transfer> t_;
};

// The group being made: its communicator, stream and transfers.
struct PendingGroup {
    ncclComm* comm = nullptr;
    CUstream_st* stream = nullptr;
    std::vector<Transfer> t;
};
PendingGroup g_pending;

size_t type_size(ncclDataType_t t) {
    switch (t) {
        case ncclInt8:
            return 1;
        case ncclInt32:
            return 4;
        case ncclInt64:
        case ncclUint64:
        case ncclFloat64:
            return 8;
        case ncclFloat:
            return 4;
    }
    return 0;
}

// The emulated combinations: float sum and average, int8 max, int64 sum.
bool reduction_of(ncclDataType_t t, ncclRedOp_t op, Reduction* r) {
    if (t == ncclFloat && (op == ncclSum || op == ncclAvg))
        *r = {MPI_FLOAT, MPI_SUM, sizeof(float), op == ncclAvg};
    else if (t == ncclInt8 && op == ncclMax)
        *r = {MPI_INT8_T, MPI_MAX, 1, false};
    else if (t == ncclInt64 && op == ncclSum)
        *r = {MPI_INT64_T, MPI_SUM, sizeof(int64_t), false};
    else
        return false;
    return true;
}

int g_group_depth = 0;

// NCCL refuses calls on a communicator whose non-blocking set-up has not completed.
bool setting_up(ncclComm* c) { return c->async_error == ncclInProgress; }

}  // namespace
}  // namespace spk_emu

using namespace spk_emu;

extern "C" {

const char* ncclGetErrorString(ncclResult_t r) {
    switch (r) {
        case ncclSuccess:
            return "no error";
        case ncclUnhandledCudaError:
            return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
        case ncclSystemError:
            return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
        case ncclInternalError:
            return "internal error - please report this issue to the NCCL developers";
        case ncclInvalidArgument:
            return "invalid argument (run with NCCL_DEBUG=WARN for details)";
        case ncclInvalidUsage:
            return "invalid usage (run with NCCL_DEBUG=WARN for details)";
        case ncclRemoteError:
            return "remote process exited or there was a network error";
        case ncclInProgress:
            return "NCCL operation in progress";
    }
    return "unknown result code";
}

const char* ncclGetLastError(ncclComm_t) { return last_note(); }

ncclResult_t ncclGetVersion(int* version) {
    if (!version) return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

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
    return ncclCommInitRankConfig(out, nranks, id, rank, nullptr);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
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
    if (!config || config->blocking != 0) return ncclSuccess;
    c->async_error = ncclInProgress;
    c->setup_polls = fault().init_hang ? -1 : 3;
    return ncclInProgress;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
    if (!g_comms.count(comm) || !async_error) return ncclInvalidArgument;
    if (setting_up(comm) && comm->setup_polls > 0 && --comm->setup_polls == 0) comm->async_error = ncclSuccess;
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

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
    if (!g_comms.count(comm)) return ncclInvalidArgument;
    if (setting_up(comm)) return usage("ncclCommFinalize: the communicator's set-up is still in progress");
    synchronize_device();  // flushes its queued all-reduces
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

// The checks of a call named `name` that NCCL makes: a live communicator whose set-up is done,
// a stream, and buffers of the communicator's device (ncclSuccess: all pass).
static ncclResult_t check_comm(const char* name, ncclComm_t comm) {
    char why[256];
    if (!g_comms.count(comm)) {
        snprintf(why, sizeof why, "%s: not a communicator (aborted or destroyed?)", name);
        return usage(why);
    }
    if (setting_up(comm)) {
        snprintf(why, sizeof why, "%s: the communicator's set-up is still in progress", name);
        return usage(why);
    }
    return ncclSuccess;
}

static ncclResult_t check_stream(const char* name, cudaStream_t stream, CUstream_st** s) {
    *s = stream_from_handle(stream);
    if (*s) return ncclSuccess;
    char why[256];
    snprintf(why, sizeof why, "%s: not a stream", name);
    return usage(why);
}

static ncclResult_t check_buffer(const char* name, ncclComm_t comm, const void* buf, size_t bytes) {
    char why[256];
    const Allocation* a = find_range(buf, bytes, why, sizeof why);
    if (!a) {
        note("%s: %s", name, why);
        return ncclInvalidArgument;
    }
    if (a->device != comm->device) {
        snprintf(why, sizeof why, "%s: a buffer is memory of another device", name);
        return usage(why);
    }
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
    const char* name = "ncclAllReduce";
    ncclResult_t r = check_comm(name, comm);
    if (r != ncclSuccess) return r;
    Reduction red;
    if (!reduction_of(datatype, op, &red)) {
        note("ncclAllReduce: only float sum and average, int8 max and int64 sum are emulated");
        return ncclInvalidArgument;
    }
    CUstream_st* s;
    if ((r = check_stream(name, stream, &s)) != ncclSuccess) return r;
    if (count == 0) return ncclSuccess;
    if ((r = check_buffer(name, comm, sendbuff, count * red.size)) != ncclSuccess ||
        (r = check_buffer(name, comm, recvbuff, count * red.size)) != ncclSuccess)
        return r;
    const bool injected = fault().at == ++g_allreduces;
    enqueue(s, std::make_unique<AllReduceOp>(comm, sendbuff, recvbuff, count, red, injected));
    return ncclSuccess;
}

// ncclAllGather and ncclReduceScatter of floats (sum).
static ncclResult_t batch_call(const char* name, const void* send, void* recv, size_t count, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, bool gather) {
    ncclResult_t r = check_comm(name, comm);
    if (r != ncclSuccess) return r;
    if (datatype != ncclFloat || (!gather && op != ncclSum)) {
        note("%s: only float (and for ncclReduceScatter, sum) is emulated", name);
        return ncclInvalidArgument;
    }
    CUstream_st* s;
    if ((r = check_stream(name, stream, &s)) != ncclSuccess) return r;
    if (count == 0) return ncclSuccess;
    const size_t all = count * (size_t)comm->nranks * sizeof(float), one = count * sizeof(float);
    if ((r = check_buffer(name, comm, send, gather ? one : all)) != ncclSuccess ||
        (r = check_buffer(name, comm, recv, gather ? all : one)) != ncclSuccess)
        return r;
    enqueue(s, std::make_unique<BatchOp>(comm, send, recv, count, gather));
    return ncclSuccess;
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
    return batch_call("ncclAllGather", sendbuff, recvbuff, sendcount, datatype, ncclSum, comm, stream, true);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    return batch_call("ncclReduceScatter", sendbuff, recvbuff, recvcount, datatype, op, comm, stream, false);
}

ncclResult_t ncclGroupStart(void) {
    g_group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
    if (g_group_depth == 0) return usage("ncclGroupEnd without ncclGroupStart");
    if (--g_group_depth == 0 && !g_pending.t.empty()) {
        enqueue(g_pending.stream, std::make_unique<P2POp>(g_pending.comm, std::move(g_pending.t)));
        g_pending = PendingGroup{};
    }
    return ncclSuccess;
}

// ncclSend and ncclRecv: the checks above, and the peer's rank.
static ncclResult_t p2p_call(const char* name, void* buf, size_t count, ncclDataType_t datatype, int peer,
                             ncclComm_t comm, cudaStream_t stream, bool send) {
    ncclResult_t r = check_comm(name, comm);
    if (r != ncclSuccess) return r;
    const size_t unit = type_size(datatype);
    if (!unit || peer < 0 || peer >= comm->nranks) {
        note("%s: datatype %d or peer %d out of range", name, (int)datatype, peer);
        return ncclInvalidArgument;
    }
    CUstream_st* s;
    if ((r = check_stream(name, stream, &s)) != ncclSuccess) return r;
    if (count == 0) return ncclSuccess;
    if ((r = check_buffer(name, comm, buf, count * unit)) != ncclSuccess) return r;
    if (g_group_depth == 0) {
        enqueue(s, std::make_unique<P2POp>(comm, std::vector<Transfer>{{buf, count * unit, peer, send}}));
        return ncclSuccess;
    }
    if (!g_pending.t.empty() && (g_pending.comm != comm || g_pending.stream != s))
        return usage("the stand-in's NCCL takes one communicator and stream for a group's sends and receives");
    g_pending.comm = comm;
    g_pending.stream = s;
    g_pending.t.push_back({buf, count * unit, peer, send});
    return ncclSuccess;
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
    return p2p_call("ncclSend", (void*)sendbuff, count, datatype, peer, comm, stream, true);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
    return p2p_call("ncclRecv", recvbuff, count, datatype, peer, comm, stream, false);
}

}  // extern "C"
