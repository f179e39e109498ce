#include "streams.h"

#include <chrono>

#include <deque>
#include <set>
#include <vector>

#include "config.h"
#include "device_memory.h"
#include "diag.h"

struct CUstream_st {
    struct Entry {
        uint64_t seq;
        std::unique_ptr<spk_emu::Operation> op;  // null: a wait for `waits_for`
        spk_emu::Marker waits_for;
    };
    std::deque<Entry> pending;
    uint64_t queued = 0, done = 0;
    unsigned flags = 0;
    int device = 0;
    bool legacy = false;
};

struct CUevent_st {
    spk_emu::Marker latest;
    bool answered_not_ready = false;  // for `latest`
    bool timing = false;              // created without cudaEventDisableTiming
    double stamp = 0.0;               // host seconds when the latest record ran (timing events)
};

namespace spk_emu {
namespace {

// Streams are never freed (an event may still name one) and neither are these sets, so the
// streams stay reachable for leak checkers after static destructors ran.
std::set<CUstream_st*>& g_streams = *new std::set<CUstream_st*>;
std::set<CUstream_st*>& g_destroyed_streams = *new std::set<CUstream_st*>;
std::set<CUevent_st*>& g_events = *new std::set<CUevent_st*>;
CUstream_st g_legacy_stream = [] {
    CUstream_st s;
    s.legacy = true;
    return s;
}();

bool blocking(const CUstream_st* s) { return !s->legacy && !(s->flags & cudaStreamNonBlocking); }

bool drain(Marker m);

// Runs the front entry of s; false when it cannot complete (stalled, or waits for a stall).
bool run_entry(CUstream_st* s) {
    CUstream_st::Entry& front = s->pending.front();
    if (front.op ? front.op->stalled() : !drain(front.waits_for)) return false;
    CUstream_st::Entry e = std::move(front);
    s->pending.pop_front();
    if (e.op) {
        DeviceAccess access;
        e.op->run();
    }
    s->done = e.seq;
    return true;
}

// Runs s's queue as far as it can go without collectives (the "as soon as possible" order).
void advance(CUstream_st* s) {
    while (!s->pending.empty()) {
        CUstream_st::Entry& e = s->pending.front();
        if (e.op ? e.op->collective() : false) return;
        if (!e.op && !marker_done(e.waits_for)) {
            advance(e.waits_for.stream);
            if (!marker_done(e.waits_for)) return;
        }
        if (!run_entry(s)) return;
    }
}

// Runs m's stream up to m, and what that waits for.
bool drain(Marker m) {
    CUstream_st* s = m.stream;
    if (!s) return true;
    while (s->done < m.seq)
        if (!run_entry(s)) return false;
    return true;
}

void advance_all() {
    advance(&g_legacy_stream);
    for (CUstream_st* s : g_streams) advance(s);
}

void push(CUstream_st* s, std::unique_ptr<Operation> op, Marker waits_for) {
    s->pending.push_back({++s->queued, std::move(op), waits_for});
}

// The legacy default stream and blocking streams wait for each other's earlier work.
void add_implicit_waits(CUstream_st* s) {
    if (s->legacy) {
        for (CUstream_st* b : g_streams)
            if (blocking(b) && b->queued > b->done) push(s, nullptr, marker_now(b));
    } else if (blocking(s) && g_legacy_stream.queued > g_legacy_stream.done) {
        push(s, nullptr, marker_now(&g_legacy_stream));
    }
}

}  // namespace

CUstream_st* stream_from_handle(cudaStream_t s) {
    if (!s) return &g_legacy_stream;
    return g_streams.count(s) ? s : nullptr;
}

CUstream_st* stream_create(unsigned flags, int device) {
    CUstream_st* s = new CUstream_st;
    s->flags = flags;
    s->device = device;
    g_streams.insert(s);
    return s;
}

void stream_destroy(CUstream_st* s) {
    synchronize(s);
    g_streams.erase(s);
    g_destroyed_streams.insert(s);
}

int stream_device(CUstream_st* s) { return s->legacy ? -1 : s->device; }

void enqueue(CUstream_st* s, std::unique_ptr<Operation> op) {
    add_implicit_waits(s);
    push(s, std::move(op), Marker{});
    if (config().reverse) advance(s);
}

void enqueue_wait(CUstream_st* s, Marker m) {
    if (!m.stream || marker_done(m)) return;
    push(s, nullptr, m);
    if (config().reverse) advance(s);
}

Marker marker_now(CUstream_st* s) { return Marker{s, s->queued}; }

bool marker_done(Marker m) { return !m.stream || m.stream->done >= m.seq; }

bool run_until(Marker m) {
    const bool done = drain(m);
    if (config().reverse) advance_all();  // a collective that ran may have unblocked others
    return done;
}

void synchronize(CUstream_st* s) {
    if (!run_until(marker_now(s)))
        fail(
            "the host waits for a stream that can never finish: a collective on it does not complete "
            "(on a GPU this call would hang)");
}

void synchronize_device() {
    synchronize(&g_legacy_stream);
    for (CUstream_st* s : g_streams) synchronize(s);
}

CUevent_st* event_create(bool timing) {
    CUevent_st* e = new CUevent_st;
    e->timing = timing;
    g_events.insert(e);
    return e;
}

bool event_valid(cudaEvent_t e) { return e && g_events.count(e); }

void event_destroy(CUevent_st* e) {
    g_events.erase(e);
    delete e;
}

namespace {

// A timing event's record: notes the host clock when the stream reaches it.
class StampOp final : public Operation {
public:
    explicit StampOp(CUevent_st* e) : e_(e) {}
    void run() override {
        if (event_valid(e_))
            e_->stamp = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    }

private:
    CUevent_st* e_;
};

}  // namespace

void event_record(CUevent_st* e, CUstream_st* s) {
    if (e->timing) enqueue(s, std::make_unique<StampOp>(e));
    add_implicit_waits(s);
    e->latest = marker_now(s);
    e->answered_not_ready = false;
}

bool event_query(CUevent_st* e) {
    if (marker_done(e->latest)) return true;
    if (!e->answered_not_ready) {
        e->answered_not_ready = true;
        return false;
    }
    return run_until(e->latest);
}

void event_synchronize(CUevent_st* e) {
    if (!run_until(e->latest))
        fail(
            "the host waits for an event that can never happen: a collective before it does not complete "
            "(on a GPU this call would hang)");
}

Marker event_marker(CUevent_st* e) { return e->latest; }

bool event_elapsed_ms(CUevent_st* start, CUevent_st* end, float* ms) {
    if (!start->timing || !end->timing || !start->latest.stream || !end->latest.stream) return false;
    *ms = (float)((end->stamp - start->stamp) * 1e3);
    return true;
}

}  // namespace spk_emu
