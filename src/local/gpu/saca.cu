// Suffix array construction on the device by prefix doubling (driven by saca.rs). Appended to
// kernels.cu by mod.rs, so it uses u64/u32/k128, BLOCK, NWARPS and block_inclusive_scan from there.
//
// State between rounds, for a text of n characters (n < 2^31):
//   sa[q]     the suffix at sorted position q (suffixes of one group in any order);
//   isa[i]    head(i) + k, where head(i) is the sorted position of the first suffix of i's group
//             (suffixes are grouped by their first h characters) and k the characters per key;
//   active[]  the sorted positions of all suffixes in groups of two or more, ascending.
// A round with offset h gives every active suffix i the key (head(i), isa[i + h]) with
// isa[p] for p >= n read as n + k - 1 - p (below every real value k..n+k-1: a suffix that ends
// sorts first), sorts them by key (groups stay in place: head(i) orders them), and splits each
// group where the key changes. Only the first round (h = k) can see p > n.

typedef unsigned char u8;

// Device-wide inclusive scan of a[0..m) in place, three launches: scan_reduce (block b's range
// [b*per, (b+1)*per) into part[b]), scan_part (exclusive scan of part[0..nb) in one block),
// scan_apply (every block scans its range starting from part[b]).
template <int OP>
__device__ __forceinline__ void scan_reduce(const u32* __restrict__ a, u64 m, u64 per, u32* __restrict__ part) {
    __shared__ u32 tmp[NWARPS];
    u64 begin = (u64)blockIdx.x * per;
    u64 end = begin + per < m ? begin + per : m;
    u32 acc = 0;
    for (u64 i = begin + threadIdx.x; i < end; i += BLOCK) acc = op2<OP>(acc, a[i]);
    u32 incl = block_inclusive_scan<BLOCK, OP>(acc, tmp);
    if (threadIdx.x == BLOCK - 1) part[blockIdx.x] = incl;
}

template <int OP>
__device__ __forceinline__ void scan_part(u32* part, u32 nb) {
    __shared__ u32 tmp[NWARPS];
    __shared__ u32 sh[BLOCK];
    u32 carry = 0;
    for (u32 base = 0; base < nb; base += BLOCK) {
        u32 i = base + threadIdx.x;
        u32 v = i < nb ? part[i] : 0;
        u32 incl = block_inclusive_scan<BLOCK, OP>(v, tmp);
        sh[threadIdx.x] = incl;
        __syncthreads();
        if (i < nb) part[i] = op2<OP>(carry, threadIdx.x > 0 ? sh[threadIdx.x - 1] : 0);
        carry = op2<OP>(carry, sh[BLOCK - 1]);
        __syncthreads();
    }
}

template <int OP>
__device__ __forceinline__ void scan_apply(u32* __restrict__ a, u64 m, u64 per, const u32* __restrict__ part) {
    __shared__ u32 tmp[NWARPS];
    __shared__ u32 sh[BLOCK];
    u64 begin = (u64)blockIdx.x * per;
    u64 end = begin + per < m ? begin + per : m;
    u32 carry = part[blockIdx.x];
    for (u64 base = begin; base < end; base += 4 * BLOCK) {
        u64 idx = base + 4 * (u64)threadIdx.x;
        u32 v[4];
#pragma unroll
        for (int j = 0; j < 4; j++) v[j] = idx + j < end ? a[idx + j] : 0;
        u32 s = op2<OP>(op2<OP>(v[0], v[1]), op2<OP>(v[2], v[3]));
        u32 incl = block_inclusive_scan<BLOCK, OP>(s, tmp);
        sh[threadIdx.x] = incl;
        __syncthreads();
        u32 run = op2<OP>(carry, threadIdx.x > 0 ? sh[threadIdx.x - 1] : 0);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            run = op2<OP>(run, v[j]);
            if (idx + j < end) a[idx + j] = run;
        }
        carry = op2<OP>(carry, sh[BLOCK - 1]);
        __syncthreads();
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK) scan_reduce_add(const u32* a, u64 m, u64 per, u32* part) {
    scan_reduce<OP_ADD>(a, m, per, part);
}
extern "C" __global__ void __launch_bounds__(BLOCK) scan_reduce_max(const u32* a, u64 m, u64 per, u32* part) {
    scan_reduce<OP_MAX>(a, m, per, part);
}
extern "C" __global__ void __launch_bounds__(BLOCK) scan_part_add(u32* part, u32 nb) { scan_part<OP_ADD>(part, nb); }
extern "C" __global__ void __launch_bounds__(BLOCK) scan_part_max(u32* part, u32 nb) { scan_part<OP_MAX>(part, nb); }
extern "C" __global__ void __launch_bounds__(BLOCK) scan_apply_add(u32* a, u64 m, u64 per, const u32* part) {
    scan_apply<OP_ADD>(a, m, per, part);
}
extern "C" __global__ void __launch_bounds__(BLOCK) scan_apply_max(u32* a, u64 m, u64 per, const u32* part) {
    scan_apply<OP_MAX>(a, m, per, part);
}

// First round's records: rec[i] = {lo: i, hi: characters i..i+k-1 packed big-endian in `bits`-bit
// fields (code[c] for bytes; the value itself for 32-bit texts), 0 past the end}.
extern "C" __global__ void __launch_bounds__(BLOCK) sa_keys_u8(const u8* __restrict__ text, u64 n,
                                                               const u8* __restrict__ code, u32 bits, u32 k,
                                                               k128* __restrict__ rec) {
    __shared__ u8 table[256];
    for (u32 c = threadIdx.x; c < 256; c += BLOCK) table[c] = code[c];
    __syncthreads();
    for (u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x; i < n; i += (u64)gridDim.x * BLOCK) {
        u64 key = 0;
        for (u32 c = 0; c < k; c++) {
            u64 j = i + c;
            key = (key << bits) | (j < n ? (u64)table[text[j]] : 0ull);
        }
        k128 r;
        r.lo = i;
        r.hi = key;
        rec[i] = r;
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK) sa_keys_u32(const u32* __restrict__ text, u64 n, u32 bits,
                                                                u32 k, k128* __restrict__ rec) {
    for (u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x; i < n; i += (u64)gridDim.x * BLOCK) {
        u64 key = 0;
        for (u32 c = 0; c < k; c++) {
            u64 j = i + c;
            key = (key << bits) | (j < n ? (u64)text[j] : 0ull);
        }
        k128 r;
        r.lo = i;
        r.hi = key;
        rec[i] = r;
    }
}

// Doubling round's records for the m active suffixes.
extern "C" __global__ void __launch_bounds__(BLOCK) sa_round_keys(const u32* __restrict__ active, u64 m,
                                                                  const u32* __restrict__ sa,
                                                                  const u32* __restrict__ isa, u64 n, u64 h, u32 k,
                                                                  u32 sbits, k128* __restrict__ rec) {
    for (u64 j = (u64)blockIdx.x * BLOCK + threadIdx.x; j < m; j += (u64)gridDim.x * BLOCK) {
        u32 i = sa[active[j]];
        u64 head = isa[i] - k;
        u64 p = i + h;
        u64 s = p < n ? (u64)isa[p] : (p < n + k ? n + k - 1 - p : 0ull);
        k128 r;
        r.lo = i;
        r.hi = (head << sbits) | s;
        rec[j] = r;
    }
}

// After a sort of m records (rec[j] belongs at sorted position q = active[j], or j when active is
// null): sa[q] = suffix, hp[j] = q + 1 where a new group starts, else 0.
extern "C" __global__ void __launch_bounds__(BLOCK) sa_heads(const k128* __restrict__ rec, u64 m,
                                                             const u32* __restrict__ active, u32* __restrict__ sa,
                                                             u32* __restrict__ hp) {
    for (u64 j = (u64)blockIdx.x * BLOCK + threadIdx.x; j < m; j += (u64)gridDim.x * BLOCK) {
        u32 q = active ? active[j] : (u32)j;
        k128 r = rec[j];
        sa[q] = (u32)r.lo;
        bool head = j == 0 || rec[j - 1].hi != r.hi;
        hp[j] = head ? q + 1 : 0;
    }
}

// After the max-scan of hp (hp[j] = head + 1 of j's new group): isa of every sorted suffix, and
// keep[j] = 1 when j's new group has two or more members.
extern "C" __global__ void __launch_bounds__(BLOCK) sa_ranks(const k128* __restrict__ rec, u64 m,
                                                             const u32* __restrict__ hp, u32 k, u32* __restrict__ isa,
                                                             u32* __restrict__ keep) {
    for (u64 j = (u64)blockIdx.x * BLOCK + threadIdx.x; j < m; j += (u64)gridDim.x * BLOCK) {
        u32 g = hp[j];
        isa[(u32)rec[j].lo] = g - 1 + k;
        bool first = j == 0 || hp[j - 1] != g;
        bool last = j + 1 == m || hp[j + 1] != g;
        keep[j] = (first && last) ? 0u : 1u;
    }
}

// After the add-scan of keep (incl[j] = kept among 0..=j): out[incl[j] - 1] = position of j.
extern "C" __global__ void __launch_bounds__(BLOCK) sa_compact(const u32* __restrict__ active,
                                                               const u32* __restrict__ incl, u64 m,
                                                               u32* __restrict__ out, u32* __restrict__ total) {
    for (u64 j = (u64)blockIdx.x * BLOCK + threadIdx.x; j < m; j += (u64)gridDim.x * BLOCK) {
        u32 c = incl[j];
        u32 prev = j > 0 ? incl[j - 1] : 0;
        if (c != prev) out[c - 1] = active ? active[j] : (u32)j;
        if (j + 1 == m) *total = c;
    }
}

