#include "app/dist/exact_reduce.h"

#include "kernels/base/check.h"
#include "kernels/base/env.h"
#include "kernels/base/spk_assert.h"
#include "kernels/exact_sum_math.h"

#include <stdlib.h>
#include <string.h>

#ifdef SPKDDP_HAVE_CUDA
#include "kernels/nccl_comm.h"
#endif

#define MAX_COUNT (1 << 28)  // MPI counts are ints

// A sum as MPI moves it: hi, lo and the bin in 17 bytes (unaligned, read through memcpy),
// merged by the reduction below (bin and limbs of one sum together, so MPI may cut a message
// anywhere between sums).
#define PACKED 17

static void put(char *p, int bin, int64_t hi, int64_t lo) {
    memcpy(p, &hi, 8);
    memcpy(p + 8, &lo, 8);
    p[16] = (char)bin;
}

// MPI's user reduction: inout[i] += in[i], both raised to the larger bin. Exact, so
// associative and commutative whatever order MPI applies it in.
static void merge_packed(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const char *a = in;
    char *b = inout;
    for (int i = 0; i < *len; i++, a += PACKED, b += PACKED) {
        int ja = (int8_t)a[16], jb = (int8_t)b[16];
        int64_t ahi, alo, bhi, blo;
        memcpy(&ahi, a, 8);
        memcpy(&alo, a + 8, 8);
        memcpy(&bhi, b, 8);
        memcpy(&blo, b + 8, 8);
        xsum_merge_into(&jb, &bhi, &blo, ja, ahi, alo);
        put(b, jb, bhi, blo);
    }
}

// MPI's user reduction on words (kernels/exact_sum_math.h): the same merge, one word a sum.
// Exact, so associative, while the limbs fit; a merge that does not fit marks the sum, and which
// partial merge overflows first may depend on MPI's order, but a marked sum is redone in full
// (words_redo), so the floats do not.
static void merge_words(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    xsum_words_merge(inout, in, *len);
}

static void pack(char *p, xsum_t s, int64_t n) {
    for (int64_t i = 0; i < n; i++) put(p + PACKED * i, s.bin[i], s.hi[i], s.lo[i]);
}

static void unpack(xsum_t s, const char *p, int64_t n) {
    for (int64_t i = 0; i < n; i++, p += PACKED) {
        memcpy(&s.hi[i], p, 8);
        memcpy(&s.lo[i], p + 8, 8);
        s.bin[i] = (int8_t)p[16];
    }
}

// A bucket in flight on MPI. With floats out on host memory: the sums as words, reduce-scattered
// with merge_words (phase 2, at once), each rank rounding its share to float, then the floats
// gathered (phase 3, a float allreduce's second half); a sum whose word overflowed is reduced
// in full at the wait (words_redo). Otherwise: the bins' maximum and whether any rank's limbs
// are too large to combine (phase 1), then, every sum raised to the bins, the limbs' sums (phase
// 2): combined, one int64 a sum (xsum_combine), or else hi and lo apart, MPI's own reductions
// in place on the sums, allreduced (sums out).
// With one term a sum (xsum_ones) on a power-of-two number of ranks, the words' reduce-scatter is
// recursive halving of our own instead (halving_start): the ranks' terms go as floats for as long
// as they are no larger than a word (two halvings: 4 bytes a sum, then 8), and words after that.
// On 2 and 4 ranks the terms meeting round to this rank's share at once, with no words at all.
typedef struct {
    int64_t from, to;
    float *out;             // the bucket's floats out[from, to), or NULL: the sums in place
    int words;              // exchanged as words
    int halving, halvings;  // the recursive halving under way (halvings: none), and how many
    int blocks[2];          // the ranks' shares this rank holds the sums of: [blocks[0], blocks[1])
    MPI_Request hreq[4];    // the halving's messages: sends [0], [2], receives [1], [3]
    uint64_t *w;            // the words [from, to): a copy in r->words, or sums held as words in place
    xsum_t sums;            // the sums (host memory), for words_redo
    int64_t over;           // how many of this rank's share overflowed
    int8_t *wide;           // [0] this rank's limbs are too large to combine, [1] some rank's (MAX);
                            // on the heap: MPI writes it while the bucket array may move
    int *share;             // (out) each rank's count, then its offset in the bucket
    MPI_Request req[5];     // phase 1: [0] bins, [1] wide; phase 2: [2] hi (or the words), [3] lo;
                            // phase 3: [4] floats
} bucket_t;

struct exact_reduce {
    const comm_t *comm;
    const spk_backend_t *be;
    struct nccl_comm *nccl;
    int nccl_full;      // SPKDDP_EXACT_SUMS=full: NCCL's buckets in the 17-byte form alone
    MPI_Comm world;     // a duplicate: these collectives keep to themselves
    MPI_Comm limbs;     // another, for the sums' phase 2 alone: MPI matches collectives by their
                        // order on a communicator, and phase 2 starts when phase 1 is seen done,
                        // at a moment that differs between ranks (the words' phase 2 starts with
                        // the bucket, on world)
    MPI_Comm floats;    // and one for phase 3
    MPI_Comm halves;    // and one for the recursive halvings' messages
    int max_tag;        // MPI_TAG_UB
    MPI_Datatype type;  // PACKED bytes (exact_reduce_now)
    MPI_Op op;          // merge_packed (exact_reduce_now)
    MPI_Op word_op;     // merge_words (buckets with floats out)
    uint64_t *words;    // (n) their words, on host memory
    float *terms;       // (3 n) the halvings' incoming terms, at their sums' places: the first's, and
                        // the second's (the partner's own and its first's)
    uint64_t *recv;     // (n) the later halvings' incoming words
    int64_t n;
    xsum_t s;          // the sums of the bucketed reduction in progress (on the backend)
    xsum_t host;       // (n) their host copy, separate memory without NCCL
    int8_t *max;       // (n) the bins' maximum: on the device (NCCL) or the host (MPI)
    bucket_t *bucket;  // the buckets in flight, in start order
    int nbuckets, cap;
    int advanced;   // buckets [0, advanced) are in phase 2 or later: they advance in start order
    int gathered;   // buckets [0, gathered) are in phase 3 (or done: no floats out)
    void *now_buf;  // exact_reduce_now's buffers: packed (and host copy), or NCCL's maximum
    int64_t now_cap;
    int64_t bytes;
};

exact_reduce_t *exact_reduce_create(const comm_t *c, const spk_backend_t *be, struct nccl_comm *nccl, int64_t n) {
    exact_reduce_t *r = callocCheck(1, sizeof *r);
    r->comm = c;
    r->be = be;
    r->nccl = nccl;
    r->n = n;
    if (nccl) {
        r->max = be->alloc((size_t)n + 1);  // device memory
        r->nccl_full = spk_env_choice("SPKDDP_EXACT_SUMS", "terms|words|full") == 2;
        comm_bcast(c, &r->nccl_full, 1, MPI_INT, 0);  // (rank 0's: every rank sends alike)
        return r;
    }
    mpiCheck(MPI_Comm_dup(c->world, &r->world));
    mpiCheck(MPI_Comm_dup(c->world, &r->limbs));
    mpiCheck(MPI_Comm_dup(c->world, &r->floats));
    mpiCheck(MPI_Comm_dup(c->world, &r->halves));
    int *tag_ub, flag;
    mpiCheck(MPI_Comm_get_attr(r->halves, MPI_TAG_UB, &tag_ub, &flag));
    r->max_tag = flag ? *tag_ub : 32767;
    mpiCheck(MPI_Type_contiguous(PACKED, MPI_BYTE, &r->type));
    mpiCheck(MPI_Type_commit(&r->type));
    mpiCheck(MPI_Op_create(merge_packed, 1, &r->op));
    mpiCheck(MPI_Op_create(merge_words, 1, &r->word_op));
    r->max = mallocCheck((size_t)n + 1);
    if (be->separate_memory)
        r->host = xsum_layout(callocCheck(1, xsum_bytes(n)), n);
    else
        r->words = mallocCheck((size_t)n * sizeof(uint64_t));
    return r;
}

// The host sums s over all ranks, blocking (p: n packed sums of scratch).
static void host_allreduce(const comm_t *c, MPI_Comm world, MPI_Datatype type, MPI_Op op, xsum_t s, int64_t n,
                           char *p) {
    SPK_ASSERT(n <= MAX_COUNT);
    pack(p, s, n);
    MPI_Request req;
    mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, p, (int)n, type, op, world, &req));
    comm_wait(c, &req);
    unpack(s, p, n);
}

void exact_allreduce_host(const comm_t *c, xsum_t s, int64_t n) {
    if (c->size == 1 || n == 0) return;
    MPI_Datatype type;
    MPI_Op op;
    mpiCheck(MPI_Type_contiguous(PACKED, MPI_BYTE, &type));
    mpiCheck(MPI_Type_commit(&type));
    mpiCheck(MPI_Op_create(merge_packed, 1, &op));
    char *p = mallocCheck((size_t)n * PACKED);
    host_allreduce(c, c->world, type, op, s, n, p);
    free(p);
    MPI_Op_free(&op);
    MPI_Type_free(&type);
}

void exact_reduce_now(exact_reduce_t *r, xsum_t s, int64_t n) {
    if (r->comm->size == 1 || n == 0) return;
    if (n > r->now_cap) {
        if (r->nccl)
            r->be->free(r->now_buf);
        else
            free(r->now_buf);
        r->now_buf = r->nccl ? r->be->alloc((size_t)n) : mallocCheck((size_t)n * PACKED + 64 + xsum_bytes(n));
        r->now_cap = n;
    }
#ifdef SPKDDP_HAVE_CUDA
    if (r->nccl) {
        r->bytes += comm_allreduce_bytes(r->comm, n * (1 + 2 * (int64_t)sizeof(int64_t)));
        nccl_exact_allreduce_start(r->nccl, s, r->now_buf, n);
        nccl_join(r->nccl);
        return;
    }
#endif
    r->bytes += comm_allreduce_bytes(r->comm, n * PACKED);
    char *p = r->now_buf;
    if (!r->be->separate_memory) {
        host_allreduce(r->comm, r->world, r->type, r->op, s, n, p);
        return;
    }
    const xsum_t h = xsum_layout(p + ((size_t)n * PACKED + 63) / 64 * 64, n);
    spk_xsum_download(r->be, h, s, n);
    host_allreduce(r->comm, r->world, r->type, r->op, h, n, p);
    spk_xsum_upload(r->be, s, h, n);
}

int exact_reduce_floats(const exact_reduce_t *r) { return r->nccl || !r->be->separate_memory; }

// The bucketed reductions: with floats out, one reduce-scatter of words and a gather of floats;
// otherwise MPI's own reductions (vectorized, no packing) in two rounds, as NCCL's path does. A
// bucket of sums ends as exact_reduce_now's merge would leave it, because raising is linear in
// the limbs and raising twice is raising once to the larger bin.
static bucket_t *push_bucket(exact_reduce_t *r, int64_t from, int64_t to, float *out) {
    if (r->nbuckets == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 16;
        bucket_t *more = mallocCheck((size_t)r->cap * sizeof *more);
        if (r->nbuckets) memcpy(more, r->bucket, (size_t)r->nbuckets * sizeof *more);
        free(r->bucket);
        r->bucket = more;
    }
    bucket_t *b = &r->bucket[r->nbuckets++];
    memset(b, 0, sizeof *b);
    b->from = from, b->to = to;
    b->out = out;
    for (int k = 0; k < 5; k++) b->req[k] = MPI_REQUEST_NULL;
    for (int k = 0; k < 4; k++) b->hreq[k] = MPI_REQUEST_NULL;
    return b;
}

// Rank i rounds the sums [offset, offset + count) of the bucket: share[i] = count,
// share[size + i] = offset.
static void set_shares(const exact_reduce_t *r, bucket_t *b) {
    const int count = (int)(b->to - b->from), size = r->comm->size;
    b->share = mallocCheck(2 * sizeof(int) * (size_t)size);
    for (int i = 0; i < size; i++) {
        b->share[size + i] = (int)((int64_t)count * i / size);
        b->share[i] = (int)((int64_t)count * (i + 1) / size) - b->share[size + i];
    }
}

// The recursive halvings of a bucket of one term a sum (2^k ranks, k halvings): in halving h this
// rank and rank ^ 2^(k-1-h) split the shares they hold, each keeping the half its own share is in
// and sending the other; after the last it holds its own share. Halving 0 sends the terms, halving
// 1 the terms and the first halving's, both as floats; later ones the words of the sums so far.
// Tags: the bucket's place, the halving and the message.
static int halving_count(int size) {
    int k = 0;
    while ((1 << k) < size) k++;
    return k;
}

// The bucket's sums [*e0, *e1) of the shares [blk0, blk1).
static void share_sums(const exact_reduce_t *r, const bucket_t *b, int blk0, int blk1, int *e0, int *e1) {
    const int size = r->comm->size, count = (int)(b->to - b->from), *off = b->share + size;
    *e0 = off[blk0];
    *e1 = blk1 < size ? off[blk1] : count;
}

// The tag of the bucket's current halving's message m: unique among the buckets in flight, whose
// halvings move on in any order.
static int halving_tag(const exact_reduce_t *r, const bucket_t *b, int m) {
    return ((int)(b - r->bucket) * 32 + b->halving) * 2 + m;
}

// Whether the bucket's halvings leave this rank's share rounded already (on 2 and 4 ranks the
// terms meet as floats and round at once).
static int halvings_round(const bucket_t *b) { return b->halvings >= 1 && b->halvings <= 2; }

// Whether the bucket's tags fit MPI's (at least 32767; MPICH's 2^28 - 1): past that (a bucket
// size made tiny), its sums go the words' way. (One term a rank: at most 32 in all, so no
// merge overflows.)
static int halving_tags_fit(const exact_reduce_t *r, const bucket_t *b) {
    return (int64_t)(b - r->bucket) * 64 + 63 <= r->max_tag;
}

// Message m of the halving: s_count of `type` sent to the partner, r_count received.
static void halving_message(exact_reduce_t *r, bucket_t *b, int m, const void *send, int s_count, void *recv,
                            int r_count, MPI_Datatype type, int partner) {
    const int tag = halving_tag(r, b, m);
    int unit;
    mpiCheck(MPI_Type_size(type, &unit));
    mpiCheck(MPI_Irecv(recv, r_count, type, partner, tag, r->halves, &b->hreq[2 * m + 1]));
    mpiCheck(MPI_Isend(send, s_count, type, partner, tag, r->halves, &b->hreq[2 * m]));
    r->bytes += (int64_t)s_count * unit;
}

static void halving_start(exact_reduce_t *r, bucket_t *b) {
    const int rank = r->comm->rank, bit = r->comm->size >> (b->halving + 1), partner = rank ^ bit;
    const int lo = b->blocks[0], hi = b->blocks[1], mid = (lo + hi) / 2, upper = (rank & bit) != 0;
    int s0, s1, k0, k1;
    share_sums(r, b, upper ? lo : mid, upper ? mid : hi, &s0, &s1);
    b->blocks[0] = upper ? mid : lo, b->blocks[1] = upper ? hi : mid;
    share_sums(r, b, b->blocks[0], b->blocks[1], &k0, &k1);
    const int64_t at = b->from, n = r->n;
    float *one = b->sums.one + at, *first = r->terms + at, *own = r->terms + n + at, *their = r->terms + 2 * n + at;
    if (b->halving == 0) {
        halving_message(r, b, 0, one + s0, s1 - s0, first + k0, k1 - k0, MPI_FLOAT, partner);
    } else if (b->halving == 1) {
        halving_message(r, b, 0, one + s0, s1 - s0, own + k0, k1 - k0, MPI_FLOAT, partner);
        halving_message(r, b, 1, first + s0, s1 - s0, their + k0, k1 - k0, MPI_FLOAT, partner);
    } else {
        halving_message(r, b, 0, b->w + s0, s1 - s0, r->recv + at + k0, k1 - k0, MPI_UINT64_T, partner);
    }
}

// The halving's messages have arrived: the kept sums take the partner's terms or words. After
// halving 0 on 2 ranks and halving 1 on 4 they are every rank's terms: this rank's share,
// rounded; after halving 1 on more, their words; after later ones, the words merged. Then the
// next halving starts.
static void halving_end(exact_reduce_t *r, bucket_t *b) {
    int k0, k1;
    share_sums(r, b, b->blocks[0], b->blocks[1], &k0, &k1);
    const int64_t at = b->from + k0, n = r->n, len = k1 - k0;
    const float *t[4] = {b->sums.one + at, r->terms + at, r->terms + n + at, r->terms + 2 * n + at};
    if (b->halving == b->halvings - 1 && halvings_round(b))
        xsum_terms_to_float(b->out + at, t, 2 << b->halving, len);
    else if (b->halving == 1)
        xsum_words_of_terms(b->w + k0, t, 4, len);
    else if (b->halving > 1)
        xsum_words_merge(b->w + k0, r->recv + at, len);
    if (++b->halving < b->halvings)
        halving_start(r, b);
    else
        b->w += k0;  // (this rank's share, as the reduce-scatter leaves it: floats_start)
}

#ifdef SPKDDP_HAVE_CUDA
// Whether NCCL's words may go for a bucket of count sums of at most `terms` terms: no merge
// overflows, and the R - 1 peers' words of this rank's share (up to ceil(count / R) each) fit the
// bucket's lo limbs, where they are received (every rank decides alike). SPKDDP_EXACT_SUMS=full
// keeps the 17 bytes (the tests' comparison of the two).
static int nccl_words(const exact_reduce_t *r, int64_t count, int64_t terms) {
    const int64_t size = r->comm->size, share = (count + size - 1) / size;
    return terms >= 1 && terms <= 32 && (size - 1) * share <= count && !r->nccl_full;
}

// A bucket on NCCL: as words, floats out (12 bytes a sum), or as sums (17), rounded at the wait.
static void nccl_start(exact_reduce_t *r, xsum_t s, int64_t from, int64_t to, float *out, int64_t terms) {
    const int64_t count = to - from;
    bucket_t *b = push_bucket(r, from, to, out);
    b->words = out && nccl_words(r, count, terms);
    if (b->words) {
        r->bytes += comm_scatter_bytes(r->comm, count * (int64_t)(sizeof(uint64_t) + sizeof(float)));
        nccl_exact_words_start(r->nccl, xsum_at(s, from), out + from, count);
        return;
    }
    r->bytes += comm_allreduce_bytes(r->comm, count * (1 + 2 * (int64_t)sizeof(int64_t)));
    nccl_exact_allreduce_start(r->nccl, xsum_at(s, from), r->max + from, count);
}

// NCCL's buckets done (the kernels' stream waits for them): those of sums with floats out rounded.
static void nccl_wait(exact_reduce_t *r) {
    nccl_allreduce_end(r->nccl, r->n);
    for (int k = 0; k < r->nbuckets; k++) {
        const bucket_t *b = &r->bucket[k];
        if (b->out && !b->words) r->be->xsum_to_float(b->out + b->from, xsum_at(r->s, b->from), b->to - b->from);
    }
    r->nbuckets = 0;
}
#endif

void exact_reduce_start(exact_reduce_t *r, xsum_t s, int64_t from, int64_t to, float *out, int64_t terms) {
    SPK_ASSERT(from < to && to <= r->n && to - from <= MAX_COUNT);
    SPK_ASSERT(!out || exact_reduce_floats(r));
    const int64_t count = to - from;
    r->s = s;
#ifdef SPKDDP_HAVE_CUDA
    if (r->nccl) {
        nccl_start(r, s, from, to, out, terms);
        return;
    }
#endif
    (void)terms;  // (MPI's words redo a sum that overflows)
    bucket_t *b = push_bucket(r, from, to, out);
    if (out) {  // (host memory) phase 2 at once: the words' reduce-scatter, in start order
        // Sums held as words are reduced in place: they take at most 32 terms in all, so no
        // merge overflows and words_redo never needs them again.
        uint64_t *w = s.word ? s.word + from : r->words + from;
        b->words = 1;
        b->w = w;
        b->sums = s;
        set_shares(r, b);
        const int size = r->comm->size;
        if (s.one && size > 1 && (size & (size - 1)) == 0 && halving_tags_fit(r, b)) {
            b->halvings = halving_count(size);
            if (!r->terms) r->terms = mallocCheck(3 * (size_t)r->n * sizeof(float));
            if (!r->recv && b->halvings > 2) r->recv = mallocCheck((size_t)r->n * sizeof(uint64_t));
            b->blocks[1] = size;
            halving_start(r, b);
            return;
        }
        xsum_to_words(w, xsum_at(s, from), count);
        r->bytes += comm_scatter_bytes(r->comm, count * (int64_t)sizeof *w);
        mpiCheck(MPI_Ireduce_scatter(MPI_IN_PLACE, w, b->share, MPI_UINT64_T, r->word_op, r->world, &b->req[2]));
        return;
    }
    r->bytes += comm_allreduce_bytes(r->comm, count + 1);
    xsum_t h = s;
    if (r->be->separate_memory) {  // the bucket's sums, to the host first
        h = r->host;
        spk_xsum_download(r->be, xsum_at(h, from), xsum_at(s, from), count);
    }
    b->wide = mallocCheck(2);
    b->wide[0] = (int8_t)!xsum_fit_combined(xsum_at(h, from), count, r->comm->size);
    mpiCheck(MPI_Iallreduce(h.bin + from, r->max + from, (int)count, MPI_INT8_T, MPI_MAX, r->world, &b->req[0]));
    mpiCheck(MPI_Iallreduce(b->wide, b->wide + 1, 1, MPI_INT8_T, MPI_MAX, r->world, &b->req[1]));
}

// Phase 2 of a bucket of sums whose phase 1 has arrived: its sums raised to the bins, their limbs
// summed. (A bucket of words is in phase 2 from its start.)
static void limbs_start(exact_reduce_t *r, bucket_t *b) {
    if (b->words) return;
    const xsum_t h = xsum_at(r->be->separate_memory ? r->host : r->s, b->from);
    const int count = (int)(b->to - b->from);
    const int limbs = b->wide[1] ? 2 : 1;
    int64_t *limb[2] = {h.hi, h.lo};
    if (limbs == 1)
        xsum_raise_combine(h, r->max + b->from, count);
    else
        xsum_raise_to(h, r->max + b->from, count);
    r->bytes += comm_allreduce_bytes(r->comm, count * limbs * (int64_t)sizeof(int64_t));
    for (int k = 0; k < limbs; k++)
        mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, limb[k], count, MPI_INT64_T, MPI_SUM, r->limbs, &b->req[2 + k]));
}

// Phase 3 of a bucket of words whose share has arrived (at the start of its words): rounded,
// then gathered.
static void floats_start(exact_reduce_t *r, bucket_t *b) {
    const int size = r->comm->size, n = b->share[r->comm->rank], at = b->share[size + r->comm->rank];
    float *out = b->out + b->from;
    if (!halvings_round(b)) b->over = xsum_words_to_float(out + at, b->w, n);
    SPK_ASSERT(!b->over || b->sums.bin);  // (more than 32 terms: the caller's exact_terms is wrong)
    r->bytes += comm_scatter_bytes(r->comm, (b->to - b->from) * (int64_t)sizeof(float));
    mpiCheck(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, b->share, b->share + size, MPI_FLOAT, r->floats,
                             &b->req[4]));
}

// Whether a gathered float stands for a sum whose word overflowed.
static int over(const float *y) {
    uint32_t u;
    memcpy(&u, y, sizeof u);
    return u == XSUM_OVER_BITS;
}

// The sums whose word overflowed somewhere (the gathered floats hold XSUM_OVER_BITS there, the
// same on every rank), reduced in full in one round as exact_reduce_now's, their floats put in
// place. Only for more than 32 terms a sum, in buckets where limbs grew large: the ranks first
// add up their shares' counts (8 bytes), and the floats are searched only if there are any.
static void words_redo(exact_reduce_t *r) {
    int words = 0;
    int64_t n = 0;
    for (int j = 0; j < r->nbuckets; j++) {
        words |= r->bucket[j].words;
        n += r->bucket[j].over;
    }
    if (!words) return;  // (every rank alike)
    MPI_Request req;
    mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, &n, 1, MPI_INT64_T, MPI_SUM, r->world, &req));
    comm_wait(r->comm, &req);
    r->bytes += comm_allreduce_bytes(r->comm, (int64_t)sizeof n);
    if (n == 0) return;
    SPK_ASSERT(n <= MAX_COUNT);
    const xsum_t t = xsum_layout(mallocCheck(xsum_bytes(n)), n);
    int64_t k = 0;
    for (int j = 0; j < r->nbuckets; j++) {
        const bucket_t *b = &r->bucket[j];
        for (int64_t i = b->from; b->words && i < b->to; i++)
            if (over(&b->out[i])) t.bin[k] = b->sums.bin[i], t.hi[k] = b->sums.hi[i], t.lo[k++] = b->sums.lo[i];
    }
    SPK_ASSERT(k == n);
    char *p = mallocCheck((size_t)n * PACKED);
    r->bytes += comm_allreduce_bytes(r->comm, n * PACKED);
    host_allreduce(r->comm, r->world, r->type, r->op, t, n, p);
    k = 0;
    for (int j = 0; j < r->nbuckets; j++) {
        const bucket_t *b = &r->bucket[j];
        for (int64_t i = b->from; b->words && i < b->to; i++)
            if (over(&b->out[i])) b->out[i] = (float)xsum_value_of(t, k++);
    }
    free(p);
    free(t.bin);
}

// Whether both requests of a pair have completed: a phase's, or a halving message's send and
// receive (MPI_Testall with MPI_STATUSES_IGNORE trips GCC's overflow warning).
static int arrived(MPI_Request *req) {
    int a, b;
    mpiCheck(MPI_Test(&req[0], &a, MPI_STATUS_IGNORE));
    mpiCheck(MPI_Test(&req[1], &b, MPI_STATUS_IGNORE));
    return a && b;
}

void exact_reduce_progress(exact_reduce_t *r) {
    if (r->nccl) return;  // (NCCL's stream moves its buckets on)
    // MPI moves nonblocking collectives only inside MPI calls. Buckets go on to their next phase
    // in start order (the same order on every rank), up to the first whose phase has not arrived.
    while (r->advanced < r->nbuckets && arrived(&r->bucket[r->advanced].req[0]))
        limbs_start(r, &r->bucket[r->advanced++]);
    for (int j = r->gathered; j < r->advanced; j++) {  // (halvings move on in any order: tagged)
        bucket_t *b = &r->bucket[j];
        while (b->halving < b->halvings && arrived(b->hreq) && arrived(b->hreq + 2)) halving_end(r, b);
    }
    while (r->gathered < r->advanced && r->bucket[r->gathered].halving == r->bucket[r->gathered].halvings &&
           arrived(&r->bucket[r->gathered].req[2])) {
        bucket_t *b = &r->bucket[r->gathered++];
        if (b->out) floats_start(r, b);
    }
    if (r->nbuckets) {  // a test on a request in flight drives MPI's progress
        bucket_t *b = &r->bucket[r->nbuckets - 1];
        MPI_Request *q = r->gathered == r->nbuckets ? &b->req[4] : r->advanced == r->nbuckets ? &b->req[2] : &b->req[0];
        int done;
        mpiCheck(MPI_Test(q, &done, MPI_STATUS_IGNORE));
    }
}

void exact_reduce_wait(exact_reduce_t *r) {
#ifdef SPKDDP_HAVE_CUDA
    if (r->nccl) {
        nccl_wait(r);
        return;
    }
#endif
    for (; r->advanced < r->nbuckets; r->advanced++) {  // every bucket's phase 2 in flight, in start order
        bucket_t *b = &r->bucket[r->advanced];
        comm_wait(r->comm, &b->req[0]);
        comm_wait(r->comm, &b->req[1]);
        limbs_start(r, b);
    }
    for (; r->gathered < r->nbuckets; r->gathered++) {  // and phase 3
        bucket_t *b = &r->bucket[r->gathered];
        while (b->halving < b->halvings) {  // (each halving's messages, then the next's)
            for (int k = 0; k < 4; k++) comm_wait(r->comm, &b->hreq[k]);
            halving_end(r, b);
        }
        comm_wait(r->comm, &b->req[2]);
        comm_wait(r->comm, &b->req[3]);
        if (b->out) floats_start(r, b);
    }
    for (int k = 0; k < r->nbuckets; k++) {
        bucket_t *b = &r->bucket[k];
        const xsum_t h = xsum_at(r->be->separate_memory ? r->host : r->s, b->from);
        comm_wait(r->comm, &b->req[2]);
        comm_wait(r->comm, &b->req[3]);
        comm_wait(r->comm, &b->req[4]);
        if (!b->out && !b->wide[1]) xsum_split_combined(h, b->to - b->from);
        if (r->be->separate_memory) spk_xsum_upload(r->be, xsum_at(r->s, b->from), h, b->to - b->from);
    }
    words_redo(r);
    for (int k = 0; k < r->nbuckets; k++) {
        free(r->bucket[k].wide);
        free(r->bucket[k].share);
    }
    r->nbuckets = 0;
    r->advanced = 0;
    r->gathered = 0;
}

int64_t exact_reduce_take_bytes(exact_reduce_t *r) {
    const int64_t b = r->bytes;
    r->bytes = 0;
    return b;
}

void exact_reduce_free(exact_reduce_t *r) {
    if (!r) return;
    if (r->nccl) {
        r->be->free(r->max);
        r->be->free(r->now_buf);
    } else {
        MPI_Op_free(&r->op);
        MPI_Op_free(&r->word_op);
        MPI_Type_free(&r->type);
        MPI_Comm_free(&r->world);
        MPI_Comm_free(&r->limbs);
        MPI_Comm_free(&r->floats);
        MPI_Comm_free(&r->halves);
        free(r->now_buf);
        free(r->terms);
        free(r->recv);
        free(r->max);
        free(r->words);
    }
    free(r->host.bin);
    free(r->bucket);
    free(r);
}
