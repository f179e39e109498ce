// How a rank waits for MPI: polling a nonblocking call, spinning on a node with a core per
// rank and with short sleeps where the node holds more ranks than cores (a spinning waiter
// would take the cycles of the rank it waits for), and never past a deadline. MPICH over TCP
// has no fault detection: a peer whose host vanished without closing its connections leaves the
// others waiting forever, and only Slurm notices lost nodes, so a wait that outlasts the
// deadline ends the job with a message, as the NCCL path's does.
#pragma once
#include "kernels/base/check.h"

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int sleepy;        // poll with 50 us naps instead of spinning
    double timeout_s;  // a wait longer than this ends the job; 0: none
} spk_wait_t;

// The policy: SPKDDP_WAIT=auto|spin|sleep (auto: sleep when ranks_on_node exceeds the cores)
// and SPKDDP_MPI_TIMEOUT (seconds, default 600; 0 waits forever).
spk_wait_t spk_wait_policy(int ranks_on_node);
// Ranks of comm on this node (collective).
int spk_ranks_on_node(MPI_Comm comm);
// Waits for req under w; `what` names what waits, in the deadline's message.
void spk_mpi_wait(const spk_wait_t *w, MPI_Request *req, const char *what);
// The process's policy (set where MPI starts, app/dist/comm.c), for code that has a communicator
// but no comm_t: its collectives are started nonblocking and waited for with
// spk_mpi_wait(spk_wait_default(), ...), so none of them waits past the deadline. Before it is
// set: spk_wait_policy(1).
void spk_wait_set_default(const spk_wait_t *w);
const spk_wait_t *spk_wait_default(void);
// A collective with that deadline: SPK_COLLECTIVE("what", MPI_Ibcast, buf, n, type, root, comm)
// starts the nonblocking call (its request appended) and waits for it.
#define SPK_COLLECTIVE(what, icall, ...)                     \
    do {                                                     \
        MPI_Request spk_req_;                                \
        mpiCheck(icall(__VA_ARGS__, &spk_req_));             \
        spk_mpi_wait(spk_wait_default(), &spk_req_, (what)); \
    } while (0)

#ifdef __cplusplus
}
#endif
