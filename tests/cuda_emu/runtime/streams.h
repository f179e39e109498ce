// Streams and events: work is queued per stream and runs in queue order; a stream waiting for
// an event waits for the work queued before the event's latest record at the time of the wait
// (CUDA's semantics). When work runs is the scheduling order's choice (config.h): as late as
// possible (when the host waits for it: only what that wait needs) or as soon as possible.
// Collective operations (NCCL) run only when something waits for them, so every rank runs
// them at the same point of its program and none blocks in MPI while its peers do not.
#pragma once
#include <cstdint>
#include <memory>

#include "cuda_runtime.h"

struct CUstream_st;
struct CUevent_st;

namespace spk_emu {

class Operation {
public:
    virtual ~Operation() = default;
    virtual void run() = 0;  // called with device memory accessible
    virtual bool collective() const { return false; }
    // Asked before run(): true while the operation cannot complete (a collective whose peers
    // never come); it then stays queued and so does everything behind it.
    virtual bool stalled() { return false; }
};

// A point in a stream's queue: done when the stream has run through entry `seq`.
struct Marker {
    CUstream_st* stream = nullptr;
    uint64_t seq = 0;
};

// nullptr (the legacy default stream) or a live stream; nullptr result: not a stream.
CUstream_st* stream_from_handle(cudaStream_t s);
CUstream_st* stream_create(unsigned flags, int device);
void stream_destroy(CUstream_st* s);  // runs what it still holds first
int stream_device(CUstream_st* s);

void enqueue(CUstream_st* s, std::unique_ptr<Operation> op);
void enqueue_wait(CUstream_st* s, Marker m);
Marker marker_now(CUstream_st* s);  // after everything queued on s so far
bool marker_done(Marker m);
// Runs what m needs, across streams; false when a stalled operation stands in the way.
bool run_until(Marker m);
// Waits for everything queued on s (on the device): ends the process with a message when that
// would wait forever behind a stalled operation, as the GPU would hang.
void synchronize(CUstream_st* s);
void synchronize_device();

// Events: handles with their latest record.
CUevent_st* event_create(bool timing);
bool event_valid(cudaEvent_t e);
void event_destroy(CUevent_st* e);
void event_record(CUevent_st* e, CUstream_st* s);
// cudaEventQuery: a pending record answers "not ready" once, then the host's patience makes
// it run (a GPU would get there by itself).
bool event_query(CUevent_st* e);
// cudaEventSynchronize: runs what the event's latest record needs; ends the process with a
// message when that would wait forever behind a stalled operation.
void event_synchronize(CUevent_st* e);
Marker event_marker(CUevent_st* e);  // {nullptr, 0} when never recorded
// cudaEventElapsedTime of two completed records of timing events: the host time between the
// moments the stand-in ran them; false when either was never recorded or does not time.
bool event_elapsed_ms(CUevent_st* start, CUevent_st* end, float* ms);

}  // namespace spk_emu
