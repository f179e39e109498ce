// What comm_init (app/dist/comm.c) makes of the node each rank runs on, printed by rank 0 in
// rank order, one line per rank:
//   rank R of K on HOST: local rank L of N, T threads
// The multinode tests start it across the nodes of a cluster and check the node-local part
// (local rank and size come from MPI_COMM_TYPE_SHARED, threads from cores / local size).
#include "app/dist/comm.h"
#include "kernels/base/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    comm_t c;
    comm_init(&c, &argc, &argv);
    enum { LINE = 160 };
    char host[64] = "", mine[LINE] = "", *all = NULL;
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "?");
    snprintf(mine, LINE, "rank %d of %d on %s: local rank %d of %d, %d threads", c.rank, c.size, host, c.local_rank,
             c.local_size, c.threads);
    if (c.rank == 0) all = mallocCheck((size_t)c.size * LINE);
    mpiCheck(MPI_Gather(mine, LINE, MPI_CHAR, all, LINE, MPI_CHAR, 0, c.world));
    for (int r = 0; c.rank == 0 && r < c.size; r++) printf("%s\n", all + (size_t)r * LINE);
    free(all);
    spk_exit_all(0);
}
