// Suffix array construction on the device by prefix doubling (driven by saca.rs). Appended to
// kernels.cu by mod.rs, so it uses u64/u32/k128, BLOCK, NWARPS and block_inclusive_scan from there.
//
// State between rounds, for a text of n characters (n < 2^32 - 64):
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

// The sort key of suffix i, in one of three modes (`mode`):
//   0: characters i..i+k-1 of a byte text, as code[c], packed big-endian in `bits`-bit fields,
//      0 past the end;
//   1: the same for a text of 32-bit values (the value itself);
//   2: a doubling round's key (head(i) << bits) | s, s = isa[i + h], or n + k - 1 - p for a
//      p = i + h at or past the end (below every real value), see the top of this file.
struct KeyArgs {
    const void* text;
    const u8* code;
    const u32* isa;
    u64 n, h;
    u32 k, bits, mode;
};

__device__ __forceinline__ u64 sa_key(const KeyArgs& a, u64 i) {
    if (a.mode == 2) {
        u64 head = a.isa[i] - a.k;
        u64 p = i + a.h;
        u64 s = p < a.n ? (u64)a.isa[p] : (p < a.n + a.k ? a.n + a.k - 1 - p : 0ull);
        return (head << a.bits) | s;
    }
    u64 key = 0;
    for (u32 c = 0; c < a.k; c++) {
        u64 j = i + c;
        u64 v = 0;
        if (j < a.n) v = a.mode == 0 ? (u64)__ldg(&a.code[((const u8*)a.text)[j]]) : (u64)((const u32*)a.text)[j];
        key = (key << a.bits) | v;
    }
    return key;
}

#define KEY_PARAMS const void *text, const u8 *code, const u32 *isa, u64 n, u64 h, u32 k, u32 bits, u32 mode
#define KEY_ARGS \
    KeyArgs ka;  \
    ka.text = text; ka.code = code; ka.isa = isa; ka.n = n; ka.h = h; ka.k = k; ka.bits = bits; ka.mode = mode

// First round's records for a text that is sorted whole: rec[i] = {lo: i, hi: key of i} (modes 0, 1).
extern "C" __global__ void __launch_bounds__(BLOCK) sa_keys(KEY_PARAMS, k128* __restrict__ rec) {
    KEY_ARGS;
    for (u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x; i < n; i += (u64)gridDim.x * BLOCK) {
        k128 r;
        r.lo = i;
        r.hi = sa_key(ka, i);
        rec[i] = r;
    }
}

// A part of a sort in key ranges. The items are suffixes src[t] (t < m; src null: t itself).
// sa_hist counts the items whose key lies in [lo, hi] into hist[(key - lo) >> shift].
extern "C" __global__ void __launch_bounds__(BLOCK) sa_hist(const u32* __restrict__ src, u64 m, KEY_PARAMS, u64 lo,
                                                            u64 hi, u32 shift, u32* __restrict__ hist) {
    KEY_ARGS;
    u32 lane = threadIdx.x & 31;
    for (u64 base = (u64)blockIdx.x * BLOCK + (threadIdx.x & ~31u); base < m; base += (u64)gridDim.x * BLOCK) {
        u64 t = base + lane;
        bool in = false;
        u32 bin = 0;
        if (t < m) {
            u64 i = src ? (u64)src[t] : t;
            u64 key = sa_key(ka, i);
            in = key >= lo && key <= hi;
            bin = (u32)((key - lo) >> shift);
        }
        // Lanes with the same bin add once (a skewed text puts whole warps in one bin).
        u32 active = __ballot_sync(0xffffffffu, in);
        if (in) {
            u32 same = __match_any_sync(active, bin);
            if (lane == (u32)(__ffs(same) - 1)) atomicAdd(&hist[bin], (u32)__popc(same));
        }
    }
}

// The items whose key lies in [lo, hi], in any order: rec[slot] = {lo: suffix, hi: key} when rec
// is not null, else out[slot] = suffix; *count counts the slots (the host zeroes it first).
extern "C" __global__ void __launch_bounds__(BLOCK) sa_select(const u32* __restrict__ src, u64 m, KEY_PARAMS, u64 lo,
                                                              u64 hi, k128* __restrict__ rec, u32* __restrict__ out,
                                                              u32* __restrict__ count) {
    KEY_ARGS;
    u32 lane = threadIdx.x & 31;
    for (u64 base = (u64)blockIdx.x * BLOCK + (threadIdx.x & ~31u); base < m; base += (u64)gridDim.x * BLOCK) {
        u64 t = base + lane;
        bool in = false;
        u64 i = 0, key = 0;
        if (t < m) {
            i = src ? (u64)src[t] : t;
            key = sa_key(ka, i);
            in = key >= lo && key <= hi;
        }
        u32 ballot = __ballot_sync(0xffffffffu, in);
        if (ballot == 0) continue;
        u32 first = 0;
        if (lane == (u32)(__ffs(ballot) - 1)) first = atomicAdd(count, (u32)__popc(ballot));
        first = __shfl_sync(0xffffffffu, first, __ffs(ballot) - 1);
        if (in) {
            u32 slot = first + __popc(ballot & ((1u << lane) - 1));
            if (rec) {
                k128 r;
                r.lo = i;
                r.hi = key;
                rec[slot] = r;
            } else {
                out[slot] = (u32)i;
            }
        }
    }
}

// out[t] = suffix of sorted record t.
extern "C" __global__ void __launch_bounds__(BLOCK) sa_place(const k128* __restrict__ rec, u64 m,
                                                             u32* __restrict__ out) {
    for (u64 t = (u64)blockIdx.x * BLOCK + threadIdx.x; t < m; t += (u64)gridDim.x * BLOCK) out[t] = (u32)rec[t].lo;
}

// After a group [q0, q0 + m) was sorted in parts (its suffixes in sa, isa not yet updated):
// hp[t] = q + 1 where a new group starts at q = q0 + t (the key differs from q - 1's), else 0.
extern "C" __global__ void __launch_bounds__(BLOCK) sa_group_heads(const u32* __restrict__ sa, u64 q0, u64 m,
                                                                   KEY_PARAMS, u32* __restrict__ hp) {
    KEY_ARGS;
    for (u64 t = (u64)blockIdx.x * BLOCK + threadIdx.x; t < m; t += (u64)gridDim.x * BLOCK) {
        u64 q = q0 + t;
        bool head = t == 0 || sa_key(ka, sa[q]) != sa_key(ka, sa[q - 1]);
        hp[t] = head ? (u32)(q + 1) : 0u;
    }
}

// After the max-scan of hp: isa of every suffix of the group.
extern "C" __global__ void __launch_bounds__(BLOCK) sa_group_ranks(const u32* __restrict__ sa, u64 q0, u64 m,
                                                                   const u32* __restrict__ hp, u32 k,
                                                                   u32* __restrict__ isa) {
    for (u64 t = (u64)blockIdx.x * BLOCK + threadIdx.x; t < m; t += (u64)gridDim.x * BLOCK)
        isa[sa[q0 + t]] = hp[t] - 1 + k;
}

// For positions [q0 + t0, q0 + t0 + w) of the group [q0, q0 + m) (isa updated): keep[j] = 1 when
// the new group of position q0 + t0 + j has two or more members.
extern "C" __global__ void __launch_bounds__(BLOCK) sa_group_keep(const u32* __restrict__ sa,
                                                                  const u32* __restrict__ isa, u64 q0, u64 m, u64 t0,
                                                                  u64 w, u32* __restrict__ keep) {
    for (u64 j = (u64)blockIdx.x * BLOCK + threadIdx.x; j < w; j += (u64)gridDim.x * BLOCK) {
        u64 t = t0 + j, q = q0 + t;
        u32 g = isa[sa[q]];
        bool first = t == 0 || isa[sa[q - 1]] != g;
        bool last = t + 1 == m || isa[sa[q + 1]] != g;
        keep[j] = (first && last) ? 0u : 1u;
    }
}

// out[0] = the index in active[] where the group of sorted position active[j] begins (the
// group's positions are consecutive, and all in active[]).
extern "C" __global__ void sa_group_start(const u32* __restrict__ active, const u32* __restrict__ sa,
                                          const u32* __restrict__ isa, u32 k, u64 j, u64* __restrict__ out) {
    u64 q = active[j];
    u64 head = isa[sa[q]] - k;
    out[0] = j - (q - head);
}

// out[0] = min(out[0], the first position q > q0 outside the group that begins at q0) (the host
// sets out[0] = n first).
extern "C" __global__ void __launch_bounds__(BLOCK) sa_group_end(const u32* __restrict__ sa,
                                                                 const u32* __restrict__ isa, u64 n, u32 k, u64 q0,
                                                                 u64* __restrict__ out) {
    for (u64 q = q0 + 1 + (u64)blockIdx.x * BLOCK + threadIdx.x; q < n; q += (u64)gridDim.x * BLOCK) {
        if (q >= *(volatile u64*)out) break;
        if ((u64)isa[sa[q]] - k != q0) atomicMin(out, q);
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
// null): sa[q] = suffix, qs[j] = q, hp[j] = q + 1 where a new group starts, else 0.
extern "C" __global__ void __launch_bounds__(BLOCK) sa_heads(const k128* __restrict__ rec, u64 m,
                                                             const u32* __restrict__ active, u32* __restrict__ sa,
                                                             u32* __restrict__ hp, u32* __restrict__ qs) {
    for (u64 j = (u64)blockIdx.x * BLOCK + threadIdx.x; j < m; j += (u64)gridDim.x * BLOCK) {
        u32 q = active ? active[j] : (u32)j;
        k128 r = rec[j];
        sa[q] = (u32)r.lo;
        qs[j] = q;
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

// After the add-scan of keep (incl[j] = kept among 0..=j): out[incl[j] - 1] = qs[j] (qs null:
// base + j); *total = the number kept.
extern "C" __global__ void __launch_bounds__(BLOCK) sa_compact(const u32* __restrict__ qs,
                                                               const u32* __restrict__ incl, u64 m, u64 base,
                                                               u32* __restrict__ out, u32* __restrict__ total) {
    for (u64 j = (u64)blockIdx.x * BLOCK + threadIdx.x; j < m; j += (u64)gridDim.x * BLOCK) {
        u32 c = incl[j];
        u32 prev = j > 0 ? incl[j - 1] : 0;
        if (c != prev) out[c - 1] = qs ? qs[j] : (u32)(base + j);
        if (j + 1 == m) *total = c;
    }
}
