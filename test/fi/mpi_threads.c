/* MPI_THREAD_MULTIPLE over libtmx-fi.so (FI_THREAD_SAFE): every rank runs 4 threads, each
 * exchanging messages with its partner rank's thread of the same index on its own tag, with
 * MPI_ANY_SOURCE receives mixed in. Run by mpi.sh with 2 ranks. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

enum { THREADS = 4, ITERS = 500 };
static int rank, size, fails[THREADS];

static void *worker(void *arg)
{
    int t = (int)(long)arg, peer = rank ^ 1, v, tag = 100 + t;
    for (int i = 0; i < ITERS; i++) {
        if (rank % 2 == 0) {
            v = i * THREADS + t;
            MPI_Send(&v, 1, MPI_INT, peer, tag, MPI_COMM_WORLD);
            MPI_Recv(&v, 1, MPI_INT, i % 2 ? MPI_ANY_SOURCE : peer, tag, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&v, 1, MPI_INT, i % 3 ? peer : MPI_ANY_SOURCE, tag, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            MPI_Send(&v, 1, MPI_INT, peer, tag, MPI_COMM_WORLD);
        }
        if (v != i * THREADS + t) {
            fails[t]++;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int       provided, all = 0, mine = 0;
    pthread_t th[THREADS];
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided != MPI_THREAD_MULTIPLE || size % 2 != 0) {
        if (rank == 0) {
            printf("FAIL: thread level %d (want %d), %d ranks (want an even number)\n", provided,
                   MPI_THREAD_MULTIPLE, size);
        }
        MPI_Finalize();
        return 1;
    }
    for (long t = 0; t < THREADS; t++) {
        pthread_create(&th[t], NULL, worker, (void *)t);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        mine += fails[t];
    }
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("%s: %d ranks, %d threads each, %d wrong values\n", all ? "FAIL" : "PASS", size,
               THREADS, all);
    }
    MPI_Finalize();
    return all ? 1 : 0;
}
