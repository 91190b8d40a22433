/* MPI point-to-point semantics, run by mpi.sh under Open MPI over libtmx-fi.so (pml cm, mtl
 * ofi, provider tmx) with 2 and 4 ranks. Each case checks its results and prints one line;
 * the exit status is non-zero when a case failed. Every rank works with rank 0 or its ring
 * neighbours, so the cases run with any number of ranks >= 2. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, fails;

#define CHECK(cond, ...)                                                                          \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            printf("FAIL rank %d line %d: ", rank, __LINE__);                                     \
            printf(__VA_ARGS__);                                                                  \
            printf("\n");                                                                         \
            fflush(stdout);                                                                       \
            fails++;                                                                              \
        }                                                                                         \
    } while (0)

static void done(const char *what)
{
    int all = 0;
    MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("%s %s\n", all ? "FAIL" : "ok", what);
        fflush(stdout);
    }
}

static void test_ring(void)
{
    int next = (rank + 1) % size, prev = (rank + size - 1) % size, in = -1;
    MPI_Sendrecv(&rank, 1, MPI_INT, next, 1, &in, 1, MPI_INT, prev, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    CHECK(in == prev, "ring: got %d", in);
    done("ring");
}

static void test_any_source_tag_order(void)
{
    /* every rank but 0 sends 3 numbered messages with tags rank*10+i; rank 0 receives them
     * with MPI_ANY_SOURCE/MPI_ANY_TAG and checks that each sender's arrive in order */
    enum { N = 3 };
    if (rank == 0) {
        int last[64];
        for (int i = 0; i < size; i++) {
            last[i] = -1;
        }
        for (int k = 0; k < (size - 1) * N; k++) {
            int        v;
            MPI_Status st;
            MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            CHECK(st.MPI_TAG == st.MPI_SOURCE * 10 + v, "any: tag %d from %d value %d",
                  st.MPI_TAG, st.MPI_SOURCE, v);
            CHECK(v == last[st.MPI_SOURCE] + 1, "non-overtaking: %d after %d from %d", v,
                  last[st.MPI_SOURCE], st.MPI_SOURCE);
            last[st.MPI_SOURCE] = v;
        }
    } else {
        for (int i = 0; i < N; i++) {
            MPI_Send(&i, 1, MPI_INT, 0, rank * 10 + i, MPI_COMM_WORLD);
        }
    }
    /* non-overtaking with one tag and a wildcard receive after a specific one */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        int a = 1, b = 2;
        MPI_Send(&a, 1, MPI_INT, 0, 7, MPI_COMM_WORLD);
        MPI_Send(&b, 1, MPI_INT, 0, 7, MPI_COMM_WORLD);
    } else if (rank == 0) {
        int x = 0, y = 0;
        MPI_Recv(&x, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(&y, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(x == 1 && y == 2, "same tag order: %d %d", x, y);
    }
    done("any_source/any_tag, non-overtaking");
}

static void test_probe(void)
{
    if (rank == 1) {
        int v[3] = {11, 22, 33};
        MPI_Send(&v[0], 1, MPI_INT, 0, 21, MPI_COMM_WORLD);
        MPI_Send(&v[1], 1, MPI_INT, 0, 22, MPI_COMM_WORLD);
        MPI_Send(&v[2], 1, MPI_INT, 0, 23, MPI_COMM_WORLD);
    } else if (rank == 0) {
        MPI_Status  st;
        MPI_Message msg;
        int         flag = 0, count = 0, v = 0;
        MPI_Probe(1, 21, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_INT, &count);
        CHECK(st.MPI_SOURCE == 1 && st.MPI_TAG == 21 && count == 1, "probe");
        MPI_Recv(&v, 1, MPI_INT, 1, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(v == 11, "probe then recv: %d", v);
        while (!flag) {
            MPI_Iprobe(MPI_ANY_SOURCE, 22, MPI_COMM_WORLD, &flag, &st);
        }
        CHECK(st.MPI_TAG == 22, "iprobe tag %d", st.MPI_TAG);
        MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &st);
        CHECK(st.MPI_TAG == 22, "mprobe takes the first: tag %d", st.MPI_TAG);
        MPI_Mrecv(&v, 1, MPI_INT, &msg, &st);
        CHECK(v == 22, "mrecv %d", v);
        flag = 0;
        while (!flag) {
            MPI_Improbe(1, 23, MPI_COMM_WORLD, &flag, &msg, &st);
        }
        MPI_Mrecv(&v, 1, MPI_INT, &msg, MPI_STATUS_IGNORE);
        CHECK(v == 33, "improbe/mrecv %d", v);
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
        CHECK(!flag, "nothing left to probe");
    }
    done("probe/iprobe/mprobe/improbe/mrecv");
}

static void test_issend_cancel(void)
{
    if (rank == 0) {
        MPI_Request r;
        MPI_Status  st;
        int         v = 5, flag = 1, cancelled = 0;
        /* a synchronous send is not complete before the receiver matched it */
        MPI_Issend(&v, 1, MPI_INT, 1, 31, MPI_COMM_WORLD, &r);
        MPI_Barrier(MPI_COMM_WORLD); /* rank 1 has not posted its receive yet */
        MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        CHECK(!flag, "issend completed before its receive was posted");
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        /* cancel a receive that nothing will match */
        int x;
        MPI_Irecv(&x, 1, MPI_INT, 1, 999, MPI_COMM_WORLD, &r);
        MPI_Cancel(&r);
        MPI_Wait(&r, &st);
        MPI_Test_cancelled(&st, &cancelled);
        CHECK(cancelled, "receive was not cancelled");
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 1) {
            int v = 0;
            MPI_Recv(&v, 1, MPI_INT, 0, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            CHECK(v == 5, "issend data %d", v);
        }
    }
    done("issend, cancel");
}

static void test_truncate_zero_large(void)
{
    enum { BIG = 4 << 20 };
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (rank == 1) {
        int v[4] = {1, 2, 3, 4};
        MPI_Send(v, 4, MPI_INT, 0, 41, MPI_COMM_WORLD);
        MPI_Send(NULL, 0, MPI_BYTE, 0, 42, MPI_COMM_WORLD);
        char *big = malloc(BIG);
        for (int i = 0; i < BIG; i++) {
            big[i] = (char)(i * 13);
        }
        MPI_Send(big, BIG, MPI_BYTE, 0, 43, MPI_COMM_WORLD);
        MPI_Send(big, BIG, MPI_BYTE, 0, 44, MPI_COMM_WORLD);
        free(big);
    } else if (rank == 0) {
        int        v[2] = {0, 0}, rc, cls, count = -1;
        MPI_Status st;
        rc = MPI_Recv(v, 2, MPI_INT, 1, 41, MPI_COMM_WORLD, &st);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_TRUNCATE, "truncation: error class %d", cls);
        CHECK(v[0] == 1 && v[1] == 2, "truncated data %d %d", v[0], v[1]);
        rc = MPI_Recv(NULL, 0, MPI_BYTE, 1, 42, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        CHECK(rc == MPI_SUCCESS && count == 0, "zero bytes: rc %d count %d", rc, count);
        char *big = malloc(BIG);
        rc        = MPI_Recv(big, BIG, MPI_BYTE, 1, 43, MPI_COMM_WORLD, &st);
        int ok    = rc == MPI_SUCCESS;
        for (int i = 0; ok && i < BIG; i++) {
            ok = big[i] == (char)(i * 13);
        }
        CHECK(ok, "large message data");
        rc = MPI_Recv(big, 1000, MPI_BYTE, 1, 44, MPI_COMM_WORLD, &st);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_TRUNCATE, "large truncation: class %d", cls);
        free(big);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    done("truncation, zero bytes, 4 MiB");
}

static void test_waitany_testsome(void)
{
    enum { N = 4 };
    int         next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int         in[N], out[N];
    MPI_Request rr[N], sr[N];
    for (int i = 0; i < N; i++) {
        out[i] = rank * 100 + i;
        MPI_Irecv(&in[i], 1, MPI_INT, prev, 50 + i, MPI_COMM_WORLD, &rr[i]);
    }
    for (int i = N - 1; i >= 0; i--) {
        MPI_Isend(&out[i], 1, MPI_INT, next, 50 + i, MPI_COMM_WORLD, &sr[i]);
    }
    int got = 0, idx, outcount, indices[N];
    while (got < N / 2) {
        MPI_Waitany(N, rr, &idx, MPI_STATUS_IGNORE);
        CHECK(idx >= 0 && in[idx] == prev * 100 + idx, "waitany %d: %d", idx, in[idx]);
        got++;
    }
    while (got < N) {
        MPI_Testsome(N, rr, &outcount, indices, MPI_STATUSES_IGNORE);
        for (int k = 0; k < outcount; k++) {
            CHECK(in[indices[k]] == prev * 100 + indices[k], "testsome %d", indices[k]);
        }
        got += outcount == MPI_UNDEFINED ? 0 : outcount;
    }
    MPI_Waitall(N, sr, MPI_STATUSES_IGNORE);
    done("waitany, testsome");
}

static void test_collectives_split(void)
{
    int sum = 0, b = rank == 0 ? 1234 : 0;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sum == size * (size - 1) / 2, "allreduce %d", sum);
    MPI_Bcast(&b, 1, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK(b == 1234, "bcast %d", b);
    int *sb = malloc(sizeof(int) * (size_t)size), *rb = malloc(sizeof(int) * (size_t)size);
    for (int i = 0; i < size; i++) {
        sb[i] = rank * 1000 + i;
    }
    MPI_Alltoall(sb, 1, MPI_INT, rb, 1, MPI_INT, MPI_COMM_WORLD);
    for (int i = 0; i < size; i++) {
        CHECK(rb[i] == i * 1000 + rank, "alltoall from %d: %d", i, rb[i]);
    }
    free(sb);
    free(rb);
    MPI_Barrier(MPI_COMM_WORLD);
    /* split: even and odd ranks; the same tags on both communicators must not mix */
    MPI_Comm sub;
    int      srank, ssize;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &sub);
    MPI_Comm_rank(sub, &srank);
    MPI_Comm_size(sub, &ssize);
    int in = -1, win = -1, v = rank;
    if (ssize > 1) {
        int snext = (srank + 1) % ssize, sprev = (srank + ssize - 1) % ssize;
        MPI_Request r[2];
        MPI_Irecv(&in, 1, MPI_INT, sprev, 60, sub, &r[0]);
        MPI_Irecv(&win, 1, MPI_INT, (rank + size - 1) % size, 60, MPI_COMM_WORLD, &r[1]);
        MPI_Send(&v, 1, MPI_INT, snext, 60, sub);
        MPI_Send(&v, 1, MPI_INT, (rank + 1) % size, 60, MPI_COMM_WORLD);
        MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
        int want = 0;
        MPI_Group wg, sg;
        MPI_Comm_group(MPI_COMM_WORLD, &wg);
        MPI_Comm_group(sub, &sg);
        MPI_Group_translate_ranks(sg, 1, &sprev, wg, &want);
        CHECK(in == want, "split ring: %d, expected %d", in, want);
        CHECK(win == (rank + size - 1) % size, "world ring beside split: %d", win);
        MPI_Group_free(&wg);
        MPI_Group_free(&sg);
    }
    int ssum = 0;
    MPI_Allreduce(&rank, &ssum, 1, MPI_INT, MPI_SUM, sub);
    int expect = 0;
    for (int i = rank % 2; i < size; i += 2) {
        expect += i;
    }
    CHECK(ssum == expect, "allreduce on the split: %d, expected %d", ssum, expect);
    MPI_Comm_free(&sub);
    done("allreduce, bcast, alltoall, barrier, comm_split");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2 || size > 64) {
        if (rank == 0) {
            printf("FAIL needs 2..64 ranks\n");
        }
        MPI_Finalize();
        return 1;
    }
    {
        /* the largest tag travels, from a named source to MPI_ANY_SOURCE */
        int *ub = NULL, flag = 0, v = -1;
        MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
        if (flag && rank < 2) {
            MPI_Status st;
            int        peer = 1 - rank;
            if (rank == 0) {
                v = 77;
                MPI_Send(&v, 1, MPI_INT, peer, *ub, MPI_COMM_WORLD);
            } else {
                MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, *ub, MPI_COMM_WORLD, &st);
                CHECK(v == 77 && st.MPI_SOURCE == 0 && st.MPI_TAG == *ub,
                      "tag_ub message: %d from %d tag %d", v, st.MPI_SOURCE, st.MPI_TAG);
            }
        }
        done("the largest tag");
    }
    test_ring();
    test_any_source_tag_order();
    test_probe();
    test_issend_cancel();
    test_truncate_zero_large();
    test_waitany_testsome();
    test_collectives_split();
    int all = 0;
    MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("%s: %d ranks\n", all ? "FAIL" : "PASS", size);
    }
    MPI_Finalize();
    return all ? 1 : 0;
}
