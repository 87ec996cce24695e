// LSD radix sort of 64- and 128-bit unsigned keys, 8-bit digits. Compiled at run time by NVRTC
// (see mod.rs); no CUDA headers are included, so the program compiles without include paths.
//
// Two kinds of pass. One-sweep (the default; see "One-sweep passes" at the end): digit counts of
// every position once per sort, then one launch per digit. Classic (the fallback when the
// one-sweep state cannot be allocated): one pass over digit `shift` is three launches:
//   hist_*     : every block counts the digits of its contiguous range of keys;
//   scan_counts: one block turns the digit-major count table into exclusive offsets;
//   scatter_*  : every block ranks its keys tile by tile (stable: warp match + per-warp counters),
//                reorders each tile in shared memory and writes it out in digit runs.
// Block b always owns keys [b*per, min(n, (b+1)*per)) in both hist and scatter, so the offsets
// line up. Digits that are constant over the input (or == and) are skipped by the host.

typedef unsigned long long u64;
typedef unsigned int u32;

struct __align__(16) k128 {
    u64 lo, hi;
};

#define BLOCK 256
#define NWARPS (BLOCK / 32)
#define RADIX 256

__device__ __forceinline__ u32 digit_of(u64 k, u32 shift) { return (u32)(k >> shift) & 0xffu; }
__device__ __forceinline__ u32 digit_of(k128 k, u32 shift) {
    return shift < 64 ? ((u32)(k.lo >> shift) & 0xffu) : ((u32)(k.hi >> (shift - 64)) & 0xffu);
}

__device__ __forceinline__ u64 warp_or(u64 x) {
    for (int o = 16; o > 0; o >>= 1) x |= __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}
__device__ __forceinline__ u64 warp_and(u64 x) {
    for (int o = 16; o > 0; o >>= 1) x &= __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

// out[0] |= OR of low words, out[1] &= AND of low words, out[2], out[3] the same for high words.
// The host sets out to {0, ~0, 0, ~0} first.
extern "C" __global__ void __launch_bounds__(BLOCK) orand_u64(const u64* __restrict__ keys, u64 n, u64* out) {
    u64 o = 0, a = ~0ull;
    for (u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x; i < n; i += (u64)gridDim.x * BLOCK) {
        u64 k = keys[i];
        o |= k;
        a &= k;
    }
    o = warp_or(o);
    a = warp_and(a);
    if ((threadIdx.x & 31) == 0) {
        atomicOr(&out[0], o);
        atomicAnd(&out[1], a);
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK) orand_u128(const k128* __restrict__ keys, u64 n, u64* out) {
    u64 ol = 0, al = ~0ull, oh = 0, ah = ~0ull;
    for (u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x; i < n; i += (u64)gridDim.x * BLOCK) {
        k128 k = keys[i];
        ol |= k.lo;
        al &= k.lo;
        oh |= k.hi;
        ah &= k.hi;
    }
    ol = warp_or(ol);
    al = warp_and(al);
    oh = warp_or(oh);
    ah = warp_and(ah);
    if ((threadIdx.x & 31) == 0) {
        atomicOr(&out[0], ol);
        atomicAnd(&out[1], al);
        atomicOr(&out[2], oh);
        atomicAnd(&out[3], ah);
    }
}

// counts[d * nblocks + b] = number of keys of block b's range whose digit is d.
template <typename K>
__device__ __forceinline__ void hist(const K* __restrict__ keys, u64 n, u64 per, u32 shift, u32* __restrict__ counts) {
    __shared__ u32 h[NWARPS][RADIX];
    u32* hw = h[threadIdx.x / 32];
    for (u32 j = threadIdx.x; j < NWARPS * RADIX; j += BLOCK) (&h[0][0])[j] = 0;
    __syncthreads();
    u64 begin = (u64)blockIdx.x * per;
    u64 end = begin + per < n ? begin + per : n;
    u64 i = begin + threadIdx.x;
    for (; i + 3 * BLOCK < end; i += 4 * BLOCK) {
        K k0 = keys[i], k1 = keys[i + BLOCK], k2 = keys[i + 2 * BLOCK], k3 = keys[i + 3 * BLOCK];
        atomicAdd(&hw[digit_of(k0, shift)], 1u);
        atomicAdd(&hw[digit_of(k1, shift)], 1u);
        atomicAdd(&hw[digit_of(k2, shift)], 1u);
        atomicAdd(&hw[digit_of(k3, shift)], 1u);
    }
    for (; i < end; i += BLOCK) atomicAdd(&hw[digit_of(keys[i], shift)], 1u);
    __syncthreads();
    for (u32 d = threadIdx.x; d < RADIX; d += BLOCK) {
        u32 s = 0;
#pragma unroll
        for (int w = 0; w < NWARPS; w++) s += h[w][d];
        counts[(u64)d * gridDim.x + blockIdx.x] = s;
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK) hist_u64(const u64* keys, u64 n, u64 per, u32 shift, u32* counts) {
    hist<u64>(keys, n, per, shift, counts);
}
extern "C" __global__ void __launch_bounds__(BLOCK) hist_u128(const k128* keys, u64 n, u64 per, u32 shift, u32* counts) {
    hist<k128>(keys, n, per, shift, counts);
}

#define OP_ADD 0
#define OP_MAX 1

template <int OP>
__device__ __forceinline__ u32 op2(u32 a, u32 b) {
    return OP == OP_ADD ? a + b : (a > b ? a : b);
}

// Inclusive scan with OP (sum by default, or max) over a block of NT threads; `tmp` holds one
// slot per warp. 0 is the identity of both operations (values are unsigned).
template <int NT, int OP = OP_ADD>
__device__ __forceinline__ u32 block_inclusive_scan(u32 x, u32* tmp) {
    u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        u32 y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= (u32)o) x = op2<OP>(x, y);
    }
    if (lane == 31) tmp[warp] = x;
    __syncthreads();
    if (warp == 0) {
        u32 t = lane < NT / 32 ? tmp[lane] : 0;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            u32 y = __shfl_up_sync(0xffffffffu, t, o);
            if (lane >= (u32)o) t = op2<OP>(t, y);
        }
        if (lane < NT / 32) tmp[lane] = t;
    }
    __syncthreads();
    if (warp > 0) x = op2<OP>(x, tmp[warp - 1]);
    __syncthreads();
    return x;
}

#define SCAN_BLOCK 1024

// Exclusive scan of counts[0..m) in place; one block.
extern "C" __global__ void __launch_bounds__(SCAN_BLOCK) scan_counts(u32* counts, u32 m) {
    __shared__ u32 tmp[SCAN_BLOCK / 32];
    u32 carry = 0;
    for (u32 base = 0; base < m; base += SCAN_BLOCK * 4) {
        // Each thread takes 4 consecutive items of a 4096-item window.
        u32 idx = base + threadIdx.x * 4;
        u32 v[4];
#pragma unroll
        for (int j = 0; j < 4; j++) v[j] = idx + j < m ? counts[idx + j] : 0;
        u32 s = v[0] + v[1] + v[2] + v[3];
        u32 incl = block_inclusive_scan<SCAN_BLOCK>(s, tmp);
        u32 run = carry + incl - s;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            if (idx + j < m) counts[idx + j] = run;
            run += v[j];
        }
        // The window's total, seen by every thread: the last thread's inclusive value.
        if (threadIdx.x == SCAN_BLOCK - 1) tmp[0] = incl;
        __syncthreads();
        carry += tmp[0];
        __syncthreads();
    }
}

// ---- Tile ranking, shared by the classic scatter and the one-sweep pass ----
//
// A tile is BLOCK * IPT consecutive keys. Warp w owns tile positions [w*IPT*32, (w+1)*IPT*32):
// loads are coalesced per warp and the warp's keys come in input order (iteration, then lane).

template <typename K, int IPT>
struct TileShared {
    u32 warp_cnt[NWARPS][RADIX];  // per warp and digit: keys, then keys in earlier warps
    u32 tile_start[RADIX];        // the tile's first position of each digit once reordered
    u32 scan_tmp[NWARPS];
    K buf[BLOCK * IPT];
};

// Loads tile[0..tile_n) into registers; keys[i] is tile position wbase + 32 i.
template <typename K, int IPT>
__device__ __forceinline__ void tile_load(const K* __restrict__ tile, u32 tile_n, u32 wbase, K (&keys)[IPT]) {
#pragma unroll
    for (int i = 0; i < IPT; i++) {
        u32 idx = wbase + i * 32;
        if (idx < tile_n) keys[i] = tile[idx];
    }
}

// Stable ranks by digit `shift`: rank[i] = keys of keys[i]'s digit before it in its warp. The
// caller has zeroed s.warp_cnt and synchronised. Returns the tile's count of digit threadIdx.x
// (BLOCK == RADIX) and leaves s.warp_cnt[w][d] = keys of digit d in the warps before w.
template <typename K, int IPT>
__device__ __forceinline__ u32 tile_rank(const K (&keys)[IPT], u32 (&rank)[IPT], u32 tile_n, u32 wbase,
                                         u32 shift, TileShared<K, IPT>& s) {
    const u32 tid = threadIdx.x, lane = tid & 31;
    const u32 lt_mask = (1u << lane) - 1u;
    u32* wc = s.warp_cnt[tid >> 5];
#pragma unroll
    for (int i = 0; i < IPT; i++) {
        u32 idx = wbase + i * 32;
        bool valid = idx < tile_n;
        u32 d = valid ? digit_of(keys[i], shift) : RADIX;  // invalid lanes group among themselves
        u32 peers = __match_any_sync(0xffffffffu, d);
        u32 base = 0;
        if (valid) {
            base = wc[d];
            rank[i] = base + __popc(peers & lt_mask);
        }
        __syncwarp();
        if (valid && lane == 31 - __clz(peers)) wc[d] = base + __popc(peers);
        __syncwarp();
    }
    __syncthreads();
    u32 total = 0;
#pragma unroll
    for (int w = 0; w < NWARPS; w++) {
        u32 c = s.warp_cnt[w][tid];
        s.warp_cnt[w][tid] = total;
        total += c;
    }
    return total;
}

// Reorders the tile by digit in shared memory and writes each digit's run to out: the tile's
// keys of digit d go to out[run_off[d] ...] in order. The caller has set s.tile_start and
// run_off (this synchronises before reading them).
template <typename K, int IPT, typename Off>
__device__ __forceinline__ void tile_write(const K (&keys)[IPT], const u32 (&rank)[IPT], u32 tile_n, u32 wbase,
                                           u32 shift, TileShared<K, IPT>& s, const Off* run_off,
                                           K* __restrict__ out) {
    const u32 tid = threadIdx.x;
    const u32* wc = s.warp_cnt[tid >> 5];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < IPT; i++) {
        u32 idx = wbase + i * 32;
        if (idx < tile_n) {
            u32 d = digit_of(keys[i], shift);
            s.buf[s.tile_start[d] + wc[d] + rank[i]] = keys[i];
        }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < IPT; i++) {
        u32 j = tid + i * BLOCK;
        if (j < tile_n) {
            K k = s.buf[j];
            u32 d = digit_of(k, shift);
            out[(u64)run_off[d] + (j - s.tile_start[d])] = k;
        }
    }
}

// Stable scatter of block b's range by digit `shift`. offsets[d * nblocks + b] is where block b's
// first key of digit d goes.
template <typename K, int IPT>
__device__ __forceinline__ void scatter(const K* __restrict__ in, K* __restrict__ out, u64 n, u64 per, u32 shift,
                                        const u32* __restrict__ offsets) {
    const u32 TILE = BLOCK * IPT;
    __shared__ TileShared<K, IPT> s;
    __shared__ u32 run_off[RADIX];

    const u32 tid = threadIdx.x;
    const u32 wbase = (tid >> 5) * IPT * 32 + (tid & 31);
    // BLOCK == RADIX: thread d owns digit d's running offset.
    run_off[tid] = offsets[(u64)tid * gridDim.x + blockIdx.x];
    u64 begin = (u64)blockIdx.x * per;
    u64 end = begin + per < n ? begin + per : n;

    for (u64 tile_base = begin; tile_base < end; tile_base += TILE) {
        u32 tile_n = end - tile_base < (u64)TILE ? (u32)(end - tile_base) : TILE;
#pragma unroll
        for (u32 j = tid; j < NWARPS * RADIX; j += BLOCK) (&s.warp_cnt[0][0])[j] = 0;
        K keys[IPT];
        u32 rank[IPT];
        tile_load(in + tile_base, tile_n, wbase, keys);
        __syncthreads();  // warp_cnt zeroed
        u32 total = tile_rank(keys, rank, tile_n, wbase, shift, s);
        u32 incl = block_inclusive_scan<BLOCK>(total, s.scan_tmp);
        s.tile_start[tid] = incl - total;
        tile_write(keys, rank, tile_n, wbase, shift, s, run_off, out);
        __syncthreads();
        run_off[tid] += total;
        // The next tile's first barrier orders this update before any read of run_off.
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK) scatter_u64(const u64* in, u64* out, u64 n, u64 per, u32 shift,
                                                             const u32* offsets) {
    scatter<u64, 16>(in, out, n, per, shift, offsets);
}
extern "C" __global__ void __launch_bounds__(BLOCK) scatter_u128(const k128* in, k128* out, u64 n, u64 per, u32 shift,
                                                              const u32* offsets) {
    scatter<k128, 8>(in, out, n, per, shift, offsets);
}

// ---- One-sweep passes: one read and one write of the keys per digit ----
//
// digit_hist_* counts, once per sort, every digit position whose bit is set in `mask` (bit p:
// the digit at shift 8p) into hist[p * 256 + d] (zeroed by the host). Every pass then needs no
// histogram of its own: onesweep_* blocks take tiles in launch order (an atomic counter), count
// their tile's digits, publish the counts in status[tile * 256 + d] and add up the counts of the
// tiles before them (decoupled look-back: a tile whose prefix is known publishes it, so the walk
// stops there). Each block only waits for tiles taken before its own, which are running or done,
// so the grid cannot deadlock. status and the counter are zeroed by the host before each pass.

template <typename K, int WORDS>
__device__ __forceinline__ void digit_hist(const K* __restrict__ keys, u64 n, u32 mask, u32* __restrict__ hist) {
    __shared__ u32 h[8 * WORDS][RADIX];
    for (u32 j = threadIdx.x; j < 8 * WORDS * RADIX; j += BLOCK) (&h[0][0])[j] = 0;
    __syncthreads();
    for (u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x; i < n; i += (u64)gridDim.x * BLOCK) {
        K k = keys[i];
#pragma unroll
        for (int p = 0; p < 8 * WORDS; p++)
            if ((mask >> p) & 1u) atomicAdd(&h[p][digit_of(k, 8 * p)], 1u);
    }
    __syncthreads();
    for (u32 j = threadIdx.x; j < 8 * WORDS * RADIX; j += BLOCK) {
        u32 c = (&h[0][0])[j];
        if (c) atomicAdd(&hist[j], c);
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK) digit_hist_u64(const u64* keys, u64 n, u32 mask, u32* hist) {
    digit_hist<u64, 1>(keys, n, mask, hist);
}
extern "C" __global__ void __launch_bounds__(BLOCK) digit_hist_u128(const k128* keys, u64 n, u32 mask, u32* hist) {
    digit_hist<k128, 2>(keys, n, mask, hist);
}

#define FLAG_AGG (1ull << 62)
#define FLAG_INC (1ull << 63)
#define VAL_MASK (FLAG_AGG - 1ull)

// Stable pass of in[0..n) by digit `shift` into out; hist_row[d] = keys of digit d. The first
// word of `state` is the tile counter, the tiles' status words follow.
template <typename K, int IPT>
__device__ __forceinline__ void onesweep(const K* __restrict__ in, K* __restrict__ out, u64 n, u32 shift,
                                         const u32* __restrict__ hist_row, u64* state) {
    const u32 TILE = BLOCK * IPT;
    __shared__ TileShared<K, IPT> s;
    __shared__ u64 run_off[RADIX];
    __shared__ u32 tile_s;

    const u32 tid = threadIdx.x;
    const u32 wbase = (tid >> 5) * IPT * 32 + (tid & 31);
    if (tid == 0) tile_s = atomicAdd((u32*)state, 1u);
#pragma unroll
    for (u32 j = tid; j < NWARPS * RADIX; j += BLOCK) (&s.warp_cnt[0][0])[j] = 0;
    // Where digit tid starts in the output: the exclusive prefix of the digit counts.
    const u32 h = hist_row[tid];
    const u32 digit_base = block_inclusive_scan<BLOCK>(h, s.scan_tmp) - h;  // synchronises
    const u32 tile = tile_s;
    const u64 tile_base = (u64)tile * TILE;
    if (tile_base >= n) return;  // more blocks than tiles (uniform over the block)
    const u32 tile_n = n - tile_base < (u64)TILE ? (u32)(n - tile_base) : TILE;

    K keys[IPT];
    u32 rank[IPT];
    tile_load(in + tile_base, tile_n, wbase, keys);
    const u32 total = tile_rank(keys, rank, tile_n, wbase, shift, s);
    // Publish this tile's count of digit tid, then add up the tiles before it.
    volatile u64* status = (volatile u64*)(state + 1);
    u64 excl = 0;
    if (tile == 0) {
        status[tid] = FLAG_INC | (u64)total;
    } else {
        status[(u64)tile * RADIX + tid] = FLAG_AGG | (u64)total;
        u64 t = tile - 1;
        for (;;) {
            u64 v = status[t * RADIX + tid];
            if ((v & (FLAG_AGG | FLAG_INC)) == 0) continue;  // not published yet
            excl += v & VAL_MASK;
            if (v & FLAG_INC) break;
            t--;
        }
        status[(u64)tile * RADIX + tid] = FLAG_INC | (excl + total);
    }
    run_off[tid] = (u64)digit_base + excl;
    u32 incl = block_inclusive_scan<BLOCK>(total, s.scan_tmp);
    s.tile_start[tid] = incl - total;
    tile_write(keys, rank, tile_n, wbase, shift, s, run_off, out);
}

extern "C" __global__ void __launch_bounds__(BLOCK) onesweep_u64(const u64* in, u64* out, u64 n, u32 shift,
                                                              const u32* hist_row, u64* state) {
    onesweep<u64, 16>(in, out, n, shift, hist_row, state);
}
extern "C" __global__ void __launch_bounds__(BLOCK) onesweep_u128(const k128* in, k128* out, u64 n, u32 shift,
                                                               const u32* hist_row, u64* state) {
    onesweep<k128, 8>(in, out, n, shift, hist_row, state);
}
