//! pDC3 (Kulla & Sanders, "Scalable Parallel Suffix Array Construction", Fig. 1).
//!
//! One level, for a text of n characters distributed in a [`Layout`]:
//! 1. **triples**: for each sample position i (i mod 3 ≠ 0, plus a dummy at n when n mod 3 = 1)
//!    the key (t[i], t[i+1], t[i+2], i) packed into one integer when it fits;
//! 2. **sort triples**: distributed sample sort (the position makes keys unique: balanced on aⁿ);
//! 3. **name**: flag key changes, global prefix sum; if all names differ they are the ranks;
//! 4. otherwise **recurse** (distributed) on the string of names of the mod-1 positions followed by
//!    the mod-2 positions, and turn its suffix array into ranks;
//! 5. **ranks to text order**: every sample rank goes to the pe that owns its position;
//! 6. **merge**: records (t[i], t[i+1], rank[i], rank[i+1], rank[i+2], i) sorted with the
//!    paper's comparison (sample vs sample by rank, otherwise by one or two characters and a rank);
//! 7. **suffix array**: the positions in sorted order; at the top level rebalanced to the input
//!    layout (a recursion level only needs each entry's global index).
//!
//! A (sub)problem of at most `config.base_case` characters is gathered on pe 0 and solved by
//! libsais (see [`super::seq`]); larger ones recurse in parallel, so no pe ever holds more than
//! its share of any level.
//!
//! Memory per level (records per pe ≈ n/p): triples 8–32 B each, merge records 24 B each (48 B when
//! a level's positions do not fit 32 bits), with up to three copies alive during an exchange.

use std::cmp::Ordering;

use bytemuck::{Pod, Zeroable};

use crate::dist::{
    build_by_kind, exchange, name_sorted, rebalance, right_halo, sample_sort, scatter, Layout,
    Pair, SortKey,
};
use crate::local::{DeviceSuffixArray, LocalSort};
use crate::Ctx;

/// A character of a level's text, as a value ≥ 1 (0 stands for "past the end").
pub trait Symbol: Pod + Send + Sync {
    fn val(self) -> u64;
    /// Sequential suffix array of a gathered text.
    fn sequential_sa(text: &[Self], threads: usize) -> Vec<u64>;
    /// The suffix array of a gathered text built by `device`, if it takes the text.
    fn device_sa(text: &[Self], device: &dyn DeviceSuffixArray) -> Option<Vec<u64>>;
    /// This pe's part of the suffix array of a distributed text, built whole on pe 0's device
    /// if it takes it ([`super::pooled`]). Collective.
    fn pooled_sa(ctx: &Ctx, text: &[Self], layout: &Layout) -> Option<Vec<u64>>;
}

impl Symbol for u8 {
    #[inline]
    fn val(self) -> u64 {
        self as u64 + 1
    }
    fn sequential_sa(text: &[u8], threads: usize) -> Vec<u64> {
        super::seq::sa_bytes(text, threads)
    }
    fn device_sa(text: &[u8], device: &dyn DeviceSuffixArray) -> Option<Vec<u64>> {
        device.suffix_array_bytes(text)
    }
    fn pooled_sa(ctx: &Ctx, text: &[u8], layout: &Layout) -> Option<Vec<u64>> {
        super::pooled::pooled_sa(ctx, text, layout)
    }
}

impl Symbol for u64 {
    #[inline]
    fn val(self) -> u64 {
        self
    }
    fn sequential_sa(text: &[u64], threads: usize) -> Vec<u64> {
        super::seq::sa_ints(text, threads)
    }
    fn device_sa(text: &[u64], device: &dyn DeviceSuffixArray) -> Option<Vec<u64>> {
        device.suffix_array_ints(text)
    }
    fn pooled_sa(ctx: &Ctx, text: &[u64], layout: &Layout) -> Option<Vec<u64>> {
        super::pooled::pooled_sa_ints(ctx, text, layout)
    }
}

/// Builds the suffix array with pDC3. Collective. Entry: each pe holds its slice of the text as
/// given by `layout`. Exit: each pe holds SA entries for the same range.
#[must_use]
pub fn dc3(ctx: &Ctx, text: &[u8], layout: &Layout) -> Vec<u64> {
    let sa = level(ctx, text, layout);
    ctx.phase("rebalance", || rebalance(&ctx.comm, sa.sa, layout))
}

/// A suffix array as a sequence sorted across pes (pe r's entries before pe r+1's) in some
/// distribution: this pe's entries and the global SA index of the first of them.
pub(super) struct SortedPart {
    pub(super) sa: Vec<u64>,
    pub(super) first: u64,
}

fn bits(x: u64) -> u32 {
    64 - x.leading_zeros()
}

/// Gathers the whole (small) text on pe 0, solves it there and sends each pe its part. The other
/// pes wait asleep meanwhile, so pe 0 runs libsais on all the CPUs of its node's pes.
fn base_case<C: Symbol>(ctx: &Ctx, t: &[C], layout: &Layout) -> Vec<u64> {
    let comm = &ctx.comm;
    let p = comm.size();
    let mut counts = vec![0usize; p];
    counts[0] = t.len();
    let all = comm.all_to_all_v(t, &counts);
    let sa = if comm.rank() == 0 {
        let _wide = crate::affinity::widen(&ctx.node_cpus);
        let threads = crate::affinity::count(&ctx.node_cpus).max(ctx.config.threads);
        let t0 = std::time::Instant::now();
        let device = ctx.device_suffix_array();
        if let Some(sa) = device.and_then(|d| C::device_sa(&all, d)) {
            log::debug!(
                "base case: {} characters on the {} backend: {:.3} s",
                all.len(),
                ctx.sorter.name(),
                t0.elapsed().as_secs_f64()
            );
            sa
        } else {
            let sa = C::sequential_sa(&all, threads);
            log::debug!(
                "base case: {} characters (largest {}), libsais with {threads} threads on {} CPUs: {:.3} s",
                all.len(),
                all.iter().map(|c| c.val()).max().unwrap_or(0),
                crate::affinity::count(&crate::affinity::current()),
                t0.elapsed().as_secs_f64()
            );
            sa
        }
    } else {
        Vec::new()
    };
    drop(all);
    if p > 1 {
        comm.quiet_barrier();
    }
    let counts: Vec<usize> = if comm.rank() == 0 {
        (0..p).map(|r| layout.local_len(r)).collect()
    } else {
        vec![0; p]
    };
    comm.all_to_all_v(&sa, &counts)
}

/// Whether a recursion level (a string of names, below the top level) should go whole to pe 0's
/// device: with a backend that builds suffix arrays (--gpu), one that fits the device is streamed
/// there (`pooled`) instead of recursing further. Collective: pe 0's capacity decides for all.
fn fits_device(ctx: &Ctx, n: usize) -> bool {
    if ctx.log.level.get() == 0 || ctx.config.backend != crate::Backend::Gpu {
        return false;
    }
    let mut cap = if ctx.comm.rank() == 0 {
        ctx.device_suffix_array()
            .map_or(0, |d| d.suffix_array_max_len()) as u64
    } else {
        0
    };
    ctx.comm.broadcast(&mut cap, 0);
    n as u64 <= cap
}

/// A sort record for a triple of characters and its position, packed so that integer order is
/// (c0, c1, c2, i) order.
trait TripleKey: SortKey {
    fn pack(c: [u64; 3], i: u64, bc: u32, bi: u32) -> Self;
    fn same_chars(&self, o: &Self, bi: u32) -> bool;
    fn index(&self, bi: u32) -> u64;
}

impl TripleKey for u64 {
    #[inline]
    fn pack(c: [u64; 3], i: u64, bc: u32, bi: u32) -> Self {
        ((((c[0] << bc) | c[1]) << bc | c[2]) << bi) | i
    }
    #[inline]
    fn same_chars(&self, o: &Self, bi: u32) -> bool {
        (self >> bi) == (o >> bi)
    }
    #[inline]
    fn index(&self, bi: u32) -> u64 {
        self & ((1u64 << bi) - 1)
    }
}

impl TripleKey for u128 {
    #[inline]
    fn pack(c: [u64; 3], i: u64, bc: u32, bi: u32) -> Self {
        let c = [c[0] as u128, c[1] as u128, c[2] as u128];
        ((((c[0] << bc) | c[1]) << bc | c[2]) << bi) | i as u128
    }
    #[inline]
    fn same_chars(&self, o: &Self, bi: u32) -> bool {
        (self >> bi) == (o >> bi)
    }
    #[inline]
    fn index(&self, bi: u32) -> u64 {
        (self & ((1u128 << bi) - 1)) as u64
    }
}

/// A triple that does not fit 128 bits (names above 2^32 or so): compared field by field.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Pod, Zeroable)]
struct WideTriple {
    c: [u64; 3],
    i: u64,
}

impl SortKey for WideTriple {
    fn sort_local(v: &mut [Self], _sorter: &dyn LocalSort) {
        crate::dist::sample_sort::par_sort(v);
    }
}

impl TripleKey for WideTriple {
    fn pack(c: [u64; 3], i: u64, _bc: u32, _bi: u32) -> Self {
        WideTriple { c, i }
    }
    fn same_chars(&self, o: &Self, _bi: u32) -> bool {
        self.c == o.c
    }
    fn index(&self, _bi: u32) -> u64 {
        self.i
    }
}

/// The record of the merge step. `r0 = rank[i]` (0 when i mod 3 = 0), `r1 = rank[i+1]`,
/// `r2 = rank[i+2]`, `c0 = t[i]`, `c1 = t[i+1]`; ranks and characters are 0 past the end. Two
/// widths: 32-bit fields (24 bytes) when every position, rank and character of the level fits,
/// which halves the merge's volume, and 64-bit fields (48 bytes) otherwise.
trait MergeRecord: SortKey {
    fn new(i: u64, c0: u64, c1: u64, r: [u64; 3]) -> Self;
    /// The position i.
    fn pos(&self) -> u64;
    /// rank[i] (a sample's rank among the samples).
    fn rank(&self) -> u64;
    /// Sorts one pe's mod-0 records by (t[i], rank[i+1]) (radix when the pair fits 64 bits:
    /// `rank_bits` bits for a rank, `char_bits` for a character).
    fn sort_mod0_local(ctx: &Ctx, v: &mut [Self], char_bits: u32, rank_bits: u32);
}

macro_rules! merge_record {
    ($name:ident, $w:ty) => {
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
        struct $name {
            i: $w,
            c0: $w,
            c1: $w,
            r0: $w,
            r1: $w,
            r2: $w,
        }

        impl Ord for $name {
            /// Kulla–Sanders' comparison: two sample suffixes by rank; a mod-0 suffix against a
            /// mod-0 or mod-1 one by (t[i], rank[i+1]); against a mod-2 one by
            /// (t[i], t[i+1], rank[i+2]).
            #[inline]
            fn cmp(&self, o: &Self) -> Ordering {
                let (a, b) = (self.i % 3, o.i % 3);
                match (a, b) {
                    (1 | 2, 1 | 2) => self.r0.cmp(&o.r0),
                    (0, 0) | (0, 1) | (1, 0) => (self.c0, self.r1).cmp(&(o.c0, o.r1)),
                    _ => (self.c0, self.c1, self.r2).cmp(&(o.c0, o.c1, o.r2)),
                }
            }
        }

        impl PartialOrd for $name {
            fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
                Some(self.cmp(o))
            }
        }

        impl SortKey for $name {
            fn sort_local(v: &mut [Self], _sorter: &dyn LocalSort) {
                crate::dist::sample_sort::par_sort(v);
            }
        }
    };
}

merge_record!(MergeRec, u64);
merge_record!(MergeRec32, u32);

impl MergeRecord for MergeRec {
    #[inline]
    fn new(i: u64, c0: u64, c1: u64, r: [u64; 3]) -> Self {
        MergeRec {
            i,
            c0,
            c1,
            r0: r[0],
            r1: r[1],
            r2: r[2],
        }
    }
    fn pos(&self) -> u64 {
        self.i
    }
    fn rank(&self) -> u64 {
        self.r0
    }
    fn sort_mod0_local(ctx: &Ctx, v: &mut [Self], char_bits: u32, rank_bits: u32) {
        if char_bits + rank_bits > 64 || ctx.tune.force_wide {
            return crate::dist::sample_sort::par_sort(v);
        }
        // r0 is unused in a mod-0 record: it carries the radix key.
        for r in v.iter_mut() {
            r.r0 = (r.c0 << rank_bits) | r.r1;
        }
        radix_sort_local(
            bytemuck::cast_slice_mut::<_, Mod0Rec>(v),
            ctx.sorter.as_ref(),
        );
    }
}

impl MergeRecord for MergeRec32 {
    #[inline]
    fn new(i: u64, c0: u64, c1: u64, r: [u64; 3]) -> Self {
        MergeRec32 {
            i: i as u32,
            c0: c0 as u32,
            c1: c1 as u32,
            r0: r[0] as u32,
            r1: r[1] as u32,
            r2: r[2] as u32,
        }
    }
    fn pos(&self) -> u64 {
        self.i as u64
    }
    fn rank(&self) -> u64 {
        self.r0 as u64
    }
    fn sort_mod0_local(ctx: &Ctx, v: &mut [Self], _char_bits: u32, _rank_bits: u32) {
        radix_sort_local(
            bytemuck::cast_slice_mut::<_, Mod0Rec32>(v),
            ctx.sorter.as_ref(),
        );
    }
}

/// A mod-0 merge record whose `r0` holds the packed key (t[i], rank[i+1]): among mod-0 records
/// that key orders exactly as the comparison does, so the local sort can be a radix sort.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Pod, Zeroable)]
struct Mod0Rec(MergeRec);

impl voracious_radix_sort::Radixable<u64> for Mod0Rec {
    type Key = u64;
    #[inline]
    fn key(&self) -> u64 {
        self.0.r0
    }
}

/// A narrow mod-0 merge record, radix-sorted by (t[i], rank[i+1]) as one 64-bit key.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Pod, Zeroable)]
struct Mod0Rec32(MergeRec32);

impl voracious_radix_sort::Radixable<u64> for Mod0Rec32 {
    type Key = u64;
    #[inline]
    fn key(&self) -> u64 {
        ((self.0.c0 as u64) << 32) | self.0.r1 as u64
    }
}

pub(super) fn radix_sort_local<T: voracious_radix_sort::Radixable<u64> + Copy + Send + Sync>(
    v: &mut [T],
    sorter: &dyn LocalSort,
) {
    use voracious_radix_sort::RadixSort;
    let threads = sorter.threads();
    if threads > 1 && v.len() >= 1 << 16 {
        v.voracious_mt_sort(threads);
    } else {
        v.voracious_sort();
    }
}

/// The record widths of one level: (name or rank, position) pairs and merge records.
trait Width {
    type P: Pair;
    type R: MergeRecord;
    /// A sample rank in text order (half the memory traffic of the random writes when narrow).
    type K: RankWord;
}

/// A rank stored in the text-order rank array of a level.
trait RankWord: Pod + Send + Sync {
    fn from_u64(x: u64) -> Self;
    fn get(self) -> u64;
}

impl RankWord for u32 {
    #[inline]
    fn from_u64(x: u64) -> Self {
        x as u32
    }
    #[inline]
    fn get(self) -> u64 {
        self as u64
    }
}

impl RankWord for u64 {
    #[inline]
    fn from_u64(x: u64) -> Self {
        x
    }
    #[inline]
    fn get(self) -> u64 {
        self
    }
}

/// 32-bit fields: every position, rank and character of the level is below 2^32.
struct Narrow;
impl Width for Narrow {
    type P = u64;
    type R = MergeRec32;
    type K = u32;
}

struct Wide;
impl Width for Wide {
    type P = u128;
    type R = MergeRec;
    type K = u64;
}

/// Whether a level of `n_ext` positions over characters up to `alphabet` fits 32-bit fields.
fn fits_narrow(ctx: &Ctx, n_ext: usize, alphabet: u64) -> bool {
    (n_ext as u64) + 2 < 1 << 32 && alphabet < 1 << 32 && !ctx.tune.force_wide
}

/// Character access for one level: this pe's slice, the two characters after it (from the right
/// neighbours), 0 past the end, and the largest character value of the whole text.
struct Chars<'a, C: Symbol> {
    t: &'a [C],
    halo: Vec<u64>,
    lo: usize,
    hi: usize,
    alphabet: u64,
}

impl<'a, C: Symbol> Chars<'a, C> {
    /// Collective (a halo exchange and a reduction).
    fn new(ctx: &Ctx, t: &'a [C], layout: &Layout) -> Self {
        let comm = &ctx.comm;
        let me = comm.rank();
        let halo = right_halo(comm, t, 2)
            .into_iter()
            .map(|c| c.val())
            .collect();
        let alphabet = comm.all_reduce_max(t.iter().map(|&c| c.val()).max().unwrap_or(0));
        Chars {
            t,
            halo,
            lo: layout.start(me),
            hi: layout.end(me),
            alphabet,
        }
    }

    #[inline]
    fn at(&self, i: usize) -> u64 {
        if i < self.hi {
            self.t[i - self.lo].val()
        } else {
            self.halo.get(i - self.hi).copied().unwrap_or(0)
        }
    }
}

/// One DC3 level on a text of `layout.len()` characters; returns its suffix array, sorted across
/// pes but not rebalanced (the caller decides whether it needs the input's layout).
pub(super) fn level<C: Symbol>(ctx: &Ctx, t: &[C], layout: &Layout) -> SortedPart {
    let n = layout.len();
    let first = layout.start(ctx.comm.rank()) as u64;
    if n <= ctx.config.base_case.max(4) {
        let sa = ctx.phase("base case", || base_case(ctx, t, layout));
        return SortedPart { sa, first };
    }
    if fits_device(ctx, n) {
        // No pe gathers the level: its names stream through pe 0 to the device and back. If the
        // device does not take it after all, the level recurses as without a GPU.
        if let Some(sa) = ctx.phase("device suffix array", || C::pooled_sa(ctx, t, layout)) {
            return SortedPart { sa, first };
        }
    }
    let chars = ctx.phase("halo", || Chars::new(ctx, t, layout));
    let n_ext = n + usize::from(n % 3 == 1);
    if fits_narrow(ctx, n_ext, chars.alphabet) {
        level_with::<C, Narrow>(ctx, layout, &chars)
    } else {
        level_with::<C, Wide>(ctx, layout, &chars)
    }
}

fn level_with<C: Symbol, W: Width>(ctx: &Ctx, layout: &Layout, chars: &Chars<C>) -> SortedPart {
    let n = layout.len();
    let at = |i: usize| chars.at(i);
    let alphabet = chars.alphabet;
    let n_ext = n + usize::from(n % 3 == 1);
    let bc = bits(alphabet);
    let bi = bits(n_ext as u64);
    let tb = if ctx.tune.force_wide {
        129
    } else {
        3 * bc + bi
    };
    let (pairs, unique) = if tb <= 64 {
        name_triples::<u64, W::P, _>(ctx, layout, &at, n_ext, bc, bi)
    } else if tb <= 128 {
        name_triples::<u128, W::P, _>(ctx, layout, &at, n_ext, bc, bi)
    } else {
        name_triples::<WideTriple, W::P, _>(ctx, layout, &at, n_ext, bc, bi)
    };
    let n1 = (n_ext + 1) / 3;
    let m = n1 + n_ext / 3;
    let rank = ranks_from_names::<W::P, W::K>(ctx, layout, pairs, n1, m, unique);
    merge::<W::R, W::K, _>(ctx, layout, &at, rank, alphabet, n_ext > n)
}

/// Finishes a suffix array from order-consistent prefix names, for pCSS when prefix doubling
/// stops paying off. `name_of[j]` is the name of position `lo + j`: the number of suffixes whose
/// first h characters are smaller, for some h ≥ 4, where a suffix shorter than h has a name of
/// its own. Such names may stand in for DC3's triple names: the recursion on the names of the
/// sample positions gives their ranks, and the merge finishes the job. (h ≥ 4 makes the last
/// mod-1 name unique, so no dummy sample is needed.) Collective.
#[must_use]
pub fn finish_from_names(ctx: &Ctx, text: &[u8], layout: &Layout, name_of: &[u64]) -> Vec<u64> {
    if fits_narrow(ctx, layout.len() + 1, 256) {
        finish_with::<Narrow>(ctx, text, layout, name_of)
    } else {
        finish_with::<Wide>(ctx, text, layout, name_of)
    }
}

fn finish_with<W: Width>(ctx: &Ctx, text: &[u8], layout: &Layout, name_of: &[u64]) -> Vec<u64> {
    let comm = &ctx.comm;
    let n = layout.len();
    let me = comm.rank();
    let (lo, hi) = (layout.start(me), layout.end(me));
    let pairs: Vec<W::P> = (lo..hi)
        .filter(|i| i % 3 != 0)
        .map(|i| W::P::pack(name_of[i - lo] + 1, i as u64))
        .collect();
    let n1 = (n + 1) / 3;
    let m = n1 + n / 3;
    let rank = ranks_from_names::<W::P, W::K>(ctx, layout, pairs, n1, m, false);
    let chars = Chars::new(ctx, text, layout);
    let sa = merge::<W::R, W::K, _>(ctx, layout, &|i| chars.at(i), rank, chars.alphabet, false);
    ctx.phase("rebalance", || rebalance(comm, sa.sa, layout))
}

/// Steps 1–3: sorts the sample triples and names them. Returns (name, position) pairs for every
/// sample position (including the dummy at n when there is one) and whether all names differ.
fn name_triples<K: TripleKey, P: Pair, A: Fn(usize) -> u64 + Sync>(
    ctx: &Ctx,
    layout: &Layout,
    at: &A,
    n_ext: usize,
    bc: u32,
    bi: u32,
) -> (Vec<P>, bool) {
    let comm = &ctx.comm;
    let p = comm.size();
    let me = comm.rank();
    let n = layout.len();
    let (lo, hi) = (layout.start(me), layout.end(me));
    let m = (n_ext + 1) / 3 + n_ext / 3;
    let triples: Vec<K> = ctx.phase("triples", || {
        let [mut v] = build_by_kind::<K, 1>(
            lo,
            hi,
            |i| usize::from(i % 3 == 0),
            |i| K::pack([at(i), at(i + 1), at(i + 2)], i as u64, bc, bi),
        );
        if n_ext > n && me == p - 1 {
            v.push(K::pack([0, 0, 0], n as u64, bc, bi));
        }
        v
    });
    let sorted = ctx.phase("sort triples", || sample_sort(ctx, triples));
    let (names, distinct) = ctx.phase("name", || {
        name_sorted(comm, &sorted, |a, b| a.same_chars(b, bi))
    });
    let pairs = sorted
        .iter()
        .zip(&names)
        .map(|(k, &nm)| P::pack(nm, k.index(bi)))
        .collect();
    (pairs, distinct as usize == m)
}

/// Steps 4–5: from (name ≥ 1, position) pairs of all m sample positions (mod-1 positions below
/// `3·n1`, a dummy at n allowed) to the rank among samples of every sample position this pe owns
/// (1-based; 0 at positions i mod 3 = 0). With `unique`, the names are the ranks already;
/// otherwise the string of names (mod-1 positions, then mod-2 positions) is solved recursively.
fn ranks_from_names<P: Pair, K: RankWord>(
    ctx: &Ctx,
    layout: &Layout,
    pairs: Vec<P>,
    n1: usize,
    m: usize,
    unique: bool,
) -> Vec<K> {
    let comm = &ctx.comm;
    let p = comm.size();
    let me = comm.rank();
    let n = layout.len();
    let (lo, hi) = (layout.start(me), layout.end(me));
    let mut rank = vec![K::from_u64(0); hi - lo];
    let pairs: Vec<P> = if unique {
        pairs.into_iter().filter(|x| (x.b() as usize) < n).collect()
    } else {
        let rl = Layout::block(m, p);
        let rpos = |i: u64| -> u64 {
            let i = i as usize;
            (if i % 3 == 1 { i / 3 } else { n1 + i / 3 }) as u64
        };
        let r_text: Vec<u64> = ctx.phase("build recursion", || {
            let pairs: Vec<P> = pairs.iter().map(|x| P::pack(x.a(), rpos(x.b()))).collect();
            let got = exchange(comm, pairs, |x| rl.owner(x.b() as usize));
            let mut r = vec![0u64; rl.local_len(me)];
            let base = rl.start(me) as u64;
            scatter(&got, &mut r, |x| ((x.b() - base) as usize, x.a()));
            r
        });
        drop(pairs);
        let sa_r = ctx.deeper(|| level::<u64>(ctx, &r_text, &rl));
        drop(r_text);
        let base = sa_r.first;
        sa_r.sa
            .iter()
            .enumerate()
            .map(|(k, &q)| {
                let q = q as usize;
                let i = if q < n1 { 3 * q + 1 } else { 3 * (q - n1) + 2 };
                (i, base + k as u64 + 1)
            })
            .filter(|&(i, _)| i < n)
            .map(|(i, r)| P::pack(r, i as u64))
            .collect()
    };
    ctx.phase("ranks to text", || {
        let got = exchange(comm, pairs, |x| layout.owner(x.b() as usize));
        scatter(&got, &mut rank, |x| {
            (x.b() as usize - lo, K::from_u64(x.a()))
        });
    });
    rank
}

/// Step 6: sorts all suffixes with the sample ranks; returns the SA sorted across pes.
///
/// One partition for everything: splitters from a random sample of all merge records (ordered by
/// Kulla–Sanders' comparison) cut the final order into p ranges, and every record goes straight
/// to the pe of its range: the mod-0 records are then radix-sorted by (t[i], rank[i+1]), the
/// sample records, whose ranks on a pe form one contiguous interval, are placed by rank (no sort),
/// and a linear merge of the two gives the pe's part of the SA. Two all-to-alls of n records in
/// all (one per kind), instead of sorting the mod-0 records, placing the samples and merging
/// across pes one after the other.
fn merge<R: MergeRecord, K: RankWord, A: Fn(usize) -> u64 + Sync>(
    ctx: &Ctx,
    layout: &Layout,
    at: &A,
    rank: Vec<K>,
    alphabet: u64,
    has_dummy: bool,
) -> SortedPart {
    let comm = &ctx.comm;
    let me = comm.rank();
    let n = layout.len();
    let (lo, hi) = (layout.start(me), layout.end(me));
    let samples_total = n - n.div_ceil(3);
    let (mod0, samples) = ctx.phase("merge records", || {
        let rhalo = right_halo(comm, &rank, 2);
        let ra = |i: usize| -> u64 {
            if i < hi {
                rank[i - lo].get()
            } else {
                rhalo.get(i - hi).map_or(0, |r| r.get())
            }
        };
        let [mod0, samples] = build_by_kind::<R, 2>(
            lo,
            hi,
            |i| usize::from(i % 3 != 0),
            |i| R::new(i as u64, at(i), at(i + 1), [ra(i), ra(i + 1), ra(i + 2)]),
        );
        (mod0, samples)
    });
    drop(rank);
    let splitters = ctx.phase("merge splitters", || {
        merge_splitters(ctx, &[&mod0, &samples], n)
    });
    let dest = |r: &R| splitters.partition_point(|s| s < r);
    let mod0 = ctx.phase("sort mod-0", || {
        let mut got = exchange(comm, mod0, dest);
        R::sort_mod0_local(
            ctx,
            &mut got,
            bits(alphabet),
            bits(samples_total as u64 + 1),
        );
        got
    });
    let samples = ctx.phase("place samples", || {
        let got = exchange(comm, samples, dest);
        // Ranks of real samples are 1..=samples_total, shifted by one when the dummy took rank 1.
        // This pe received the ranks first..first+len: one interval of the sample order.
        let first = comm.exscan_sum(got.len() as u64) + 1 + u64::from(has_dummy);
        let mut out = vec![R::zeroed(); got.len()];
        scatter(&got, &mut out, |r| ((r.rank() - first) as usize, *r));
        out
    });
    let sa = ctx.phase("merge", || {
        let mut out = Vec::with_capacity(mod0.len() + samples.len());
        merge_positions(&mut out, &mod0, &samples, |r| r.pos());
        out
    });
    ctx.note_imbalance(sa.len(), n);
    let first = comm.exscan_sum(sa.len() as u64);
    SortedPart { sa, first }
}

/// Appends the positions of two sorted lists to `out` in merged order.
pub(super) fn merge_positions<R: Ord>(
    out: &mut Vec<u64>,
    a: &[R],
    b: &[R],
    pos: impl Fn(&R) -> u64,
) {
    let (mut x, mut y) = (0, 0);
    while x < a.len() && y < b.len() {
        if a[x] < b[y] {
            out.push(pos(&a[x]));
            x += 1;
        } else {
            out.push(pos(&b[y]));
            y += 1;
        }
    }
    out.extend(a[x..].iter().map(&pos));
    out.extend(b[y..].iter().map(&pos));
}

/// p − 1 splitters of the final order of all n merge records, from a random sample of both
/// kinds of records (each pe draws from each in proportion to its share).
/// Collective; the same on every pe.
pub(super) fn merge_splitters<R: Pod + Ord + Send + Sync>(
    ctx: &Ctx,
    kinds: &[&[R]],
    n: usize,
) -> Vec<R> {
    let comm = &ctx.comm;
    let p = comm.size();
    if p == 1 || n == 0 {
        return Vec::new();
    }
    let per_pe = ((1usize << 18) / p).clamp(64, 1024);
    let mut rng =
        crate::dist::sample_sort::SplitMix::new(0x3e76e ^ ((comm.rank() as u64) << 32) ^ n as u64);
    let mut draw = |v: &[R]| -> Vec<R> {
        let want =
            ((v.len() as u128 * (per_pe * p) as u128).div_ceil(n as u128) as usize).min(v.len());
        (0..want)
            .map(|_| v[(rng.next() % v.len() as u64) as usize])
            .collect()
    };
    let mut local = Vec::new();
    for v in kinds {
        local.extend(draw(v));
    }
    let mut all = comm.all_gather_v(&local);
    all.sort_unstable();
    if all.is_empty() {
        return Vec::new();
    }
    (1..p).map(|j| all[j * all.len() / p]).collect()
}
