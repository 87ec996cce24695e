//! pDC3 (Kulla & Sanders, "Scalable Parallel Suffix Array Construction", Fig. 1): the
//! difference-cover skeleton ([`super`]) with the cover {1, 2} mod 3 ([`Dc3`]).
//!
//! One level, for a text of n characters distributed in a [`Layout`]:
//! 1. **triples**: for each sample position i (i mod 3 ≠ 0, plus a dummy at n when n mod 3 = 1)
//!    the key (t[i], t[i+1], t[i+2], i) packed into one integer when it fits;
//! 2. **sort triples**: distributed sample sort (the position makes keys unique: balanced on aⁿ);
//! 3. **name**: flag key changes, global prefix sum; if all names differ they are the ranks;
//! 4. otherwise **recurse** (distributed) on the string of names of the mod-1 positions followed by
//!    the mod-2 positions, and turn its suffix array into ranks;
//! 5. **ranks to text order**: every sample rank goes to the pe that owns its position;
//! 6. **merge**: records (t[i], t[i+1], the ranks of the two sample positions among i..i+2, i)
//!    sorted with the paper's comparison (sample vs sample by rank, otherwise by one or two
//!    characters and a rank): samples placed by rank, mod-0 suffixes radix-sorted by
//!    (t[i], rank[i+1]), one linear merge;
//! 7. **suffix array**: the positions in sorted order; at the top level rebalanced to the input
//!    layout (a recursion level only needs each entry's global index).
//!
//! A (sub)problem of at most `config.base_case` characters is gathered on pe 0 and solved by
//! libsais (see [`super::super::seq`]); larger ones recurse in parallel, so no pe ever holds more
//! than its share of any level.
//!
//! Memory per level (records per pe ≈ n/p): triples 8–32 B each, merge records 20 B each (40 B
//! when a level's positions do not fit 32 bits), with up to two copies of one kind alive during
//! its exchange.

use std::cmp::Ordering;

use bytemuck::{Pod, Zeroable};
use rayon::prelude::*;

use super::cover::{Cover, Dc3};
use super::merge::{
    merge, merge_record, radix_by_key, radix_sort_local, sort_by_key_via_index, Head,
};
use super::{
    bits, fits_narrow, name_pairs, name_samples, sample_ranks, Chars, Narrow, Phases, SampleKey,
    Samples, SortedPart, Symbol, Wide, Width,
};
use crate::dist::{build_by_kind, rebalance, Layout, Pair, SortKey};
use crate::local::LocalSort;
use crate::Ctx;

const PHASES: Phases = Phases {
    sort_samples: "sort triples",
    name_samples: "name",
    sort_groups: "sort mod-0",
};

/// Builds the suffix array with pDC3. Collective. Entry: each pe holds its slice of the text as
/// given by `layout`. Exit: each pe holds SA entries for the same range.
#[must_use]
pub fn dc3(ctx: &Ctx, text: &[u8], layout: &Layout) -> Vec<u64> {
    let sa = level(ctx, text, layout);
    ctx.phase("rebalance", || rebalance(&ctx.comm, sa.sa, layout))
}

/// One DC3 level on a text of `layout.len()` characters; returns its suffix array, sorted across
/// pes but not rebalanced (the caller decides whether it needs the input's layout). Also the
/// skeleton's recursion (for DC7 too).
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
    let (chars, alphabet) = ctx.phase("halo", || {
        (Chars::new(ctx, t, layout, 2), largest_char(ctx, t))
    });
    let smp = Samples::<Dc3>::new(n, true);
    if fits_narrow(ctx, n + usize::from(smp.dummy), alphabet) {
        level_with::<C, Narrow>(ctx, layout, &chars, alphabet, &smp)
    } else {
        level_with::<C, Wide>(ctx, layout, &chars, alphabet, &smp)
    }
}

/// Steps 1–6 of a level in the record widths `W`.
fn level_with<C: Symbol, W: Dc3Width>(
    ctx: &Ctx,
    layout: &Layout,
    chars: &Chars<C>,
    alphabet: u64,
    smp: &Samples<Dc3>,
) -> SortedPart {
    // Positions up to n − 1, or n with the dummy.
    let (bc, bi) = (
        bits(alphabet),
        bits((layout.len() + usize::from(smp.dummy)) as u64),
    );
    let tb = if ctx.tune.force_wide {
        129
    } else {
        3 * bc + bi
    };
    let (pairs, unique) = if tb <= 64 {
        name_triples::<u64, W::P, C>(ctx, layout, chars, smp, bc, bi)
    } else if tb <= 128 {
        name_triples::<u128, W::P, C>(ctx, layout, chars, smp, bc, bi)
    } else {
        name_triples::<WideTriple, W::P, C>(ctx, layout, chars, smp, bc, bi)
    };
    let rank = sample_ranks::<Dc3, W::P, W::K>(ctx, layout, smp, pairs, unique);
    merge_by_chars::<W, C>(ctx, layout, chars, alphabet, rank)
}

/// Finishes a suffix array from order-consistent prefix names, for pCSS when prefix doubling
/// stops paying off. `name_of[j]` is the name of position `lo + j`: the number of suffixes whose
/// first h characters are smaller, for some h ≥ 4, where a suffix shorter than h has a name of
/// its own. Such names may stand in for DC3's triple names: the recursion on the names of the
/// sample positions gives their ranks, and the merge finishes the job. (h ≥ 4 makes the last
/// mod-1 name unique, so no dummy sample is needed.) The names are freed once the samples have
/// taken theirs. Collective.
#[must_use]
pub fn finish_from_names(ctx: &Ctx, text: &[u8], layout: &Layout, name_of: Vec<u64>) -> Vec<u64> {
    if fits_narrow(ctx, layout.len() + 1, 256) {
        finish_with::<Narrow>(ctx, text, layout, name_of)
    } else {
        finish_with::<Wide>(ctx, text, layout, name_of)
    }
}

fn finish_with<W: Dc3Width>(
    ctx: &Ctx,
    text: &[u8],
    layout: &Layout,
    name_of: Vec<u64>,
) -> Vec<u64> {
    let smp = Samples::<Dc3>::new(layout.len(), false);
    let pairs = name_pairs::<Dc3, W::P>(ctx, layout, &smp, &name_of);
    drop(name_of);
    let rank = sample_ranks::<Dc3, W::P, W::K>(ctx, layout, &smp, pairs, false);
    let chars = Chars::new(ctx, text, layout, 2);
    let alphabet = largest_char(ctx, text);
    let sa = merge_by_chars::<W, u8>(ctx, layout, &chars, alphabet, rank);
    ctx.phase("rebalance", || rebalance(&ctx.comm, sa.sa, layout))
}

/// The largest character value of the whole text. Collective (one reduction).
fn largest_char<C: Symbol>(ctx: &Ctx, t: &[C]) -> u64 {
    ctx.comm
        .all_reduce_max(t.iter().map(|&c| c.val()).max().unwrap_or(0))
}

/// Steps 1–3: builds the triple of every sample position of this pe (and the dummy on the last
/// pe), sorts and names them. Returns (name, place in the recursion string) pairs and whether
/// all names differ. Collective.
fn name_triples<K: TripleKey, P: Pair, C: Symbol>(
    ctx: &Ctx,
    layout: &Layout,
    chars: &Chars<C>,
    smp: &Samples<Dc3>,
    bc: u32,
    bi: u32,
) -> (Vec<P>, bool) {
    let comm = &ctx.comm;
    let me = comm.rank();
    let n = layout.len();
    let (lo, hi) = (layout.start(me), layout.end(me));
    let at = |i: usize| chars.at(i);
    let triples: Vec<K> = ctx.phase("triples", || {
        let [mut v] = build_by_kind::<K, 1>(
            lo,
            hi,
            |i| Dc3::kind(i % 3),
            |i| K::pack([at(i), at(i + 1), at(i + 2)], i as u64, bc, bi),
        );
        if smp.dummy && me == comm.size() - 1 {
            v.push(K::pack([0, 0, 0], n as u64, bc, bi));
        }
        v
    });
    name_samples(ctx, smp, triples, bi, &PHASES)
}

/// Step 6 with heads of two characters from `chars`.
fn merge_by_chars<W: Dc3Width, C: Symbol>(
    ctx: &Ctx,
    layout: &Layout,
    chars: &Chars<C>,
    alphabet: u64,
    rank: Vec<W::K>,
) -> SortedPart {
    let n = layout.len();
    let samples = n - n.div_ceil(3);
    let (char_bits, rank_bits) = (bits(alphabet), bits(samples as u64 + 1));
    merge::<W::R, W::K, { Dc3::KINDS }>(
        ctx,
        layout,
        rank,
        |i| W::R::head_of([chars.at(i), chars.at(i + 1)]),
        &PHASES,
        |v| W::R::sort_mod0(ctx, v, char_bits, rank_bits),
    )
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
trait TripleKey: SampleKey {
    fn pack(c: [u64; 3], i: u64, bc: u32, bi: u32) -> Self;
}

impl TripleKey for u64 {
    #[inline]
    fn pack(c: [u64; 3], i: u64, bc: u32, bi: u32) -> Self {
        ((((c[0] << bc) | c[1]) << bc | c[2]) << bi) | i
    }
}

impl SampleKey for u64 {
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
}

impl SampleKey for u128 {
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
}

impl SampleKey for WideTriple {
    fn same_chars(&self, o: &Self, _bi: u32) -> bool {
        self.c == o.c
    }
    fn index(&self, _bi: u32) -> u64 {
        self.i
    }
}

merge_record!(
    /// A merge record with 32-bit fields (20 bytes): when every position, rank and character of
    /// the level fits, which shrinks the merge's volume.
    Rec32: Dc3, [u32; 2], u32
);

merge_record!(
    /// A merge record with 64-bit fields (40 bytes).
    Rec64: Dc3, [u64; 2], u64
);

/// A head of two characters t[i], t[i+1] (0 past the end).
macro_rules! two_chars {
    ($w:ty) => {
        impl Head for [$w; 2] {
            #[inline]
            fn cmp_prefix(&self, o: &Self, l: usize) -> Ordering {
                match l {
                    0 => Ordering::Equal,
                    1 => self[0].cmp(&o[0]),
                    _ => self.cmp(o),
                }
            }
        }
    };
}

two_chars!(u32);
two_chars!(u64);

/// DC3's merge records: heads of two characters, and the local sort of the mod-0 group.
trait Dc3Record: super::merge::MergeRecord {
    fn head_of(c: [u64; 2]) -> Self::Head;
    /// Sorts one pe's mod-0 records by (t[i], rank[i+1]) (radix when the pair fits 64 bits:
    /// `rank_bits` bits for a rank, `char_bits` for a character).
    fn sort_mod0(ctx: &Ctx, v: Vec<Self>, char_bits: u32, rank_bits: u32) -> Vec<Self>;
}

impl Dc3Record for Rec32 {
    #[inline]
    fn head_of(c: [u64; 2]) -> [u32; 2] {
        [c[0] as u32, c[1] as u32]
    }
    fn sort_mod0(ctx: &Ctx, mut v: Vec<Self>, _char_bits: u32, _rank_bits: u32) -> Vec<Self> {
        radix_sort_local(
            bytemuck::cast_slice_mut::<_, Mod0Rec32>(&mut v),
            ctx.sorter.as_ref(),
        );
        v
    }
}

impl Dc3Record for Rec64 {
    #[inline]
    fn head_of(c: [u64; 2]) -> [u64; 2] {
        c
    }
    fn sort_mod0(ctx: &Ctx, mut v: Vec<Self>, char_bits: u32, rank_bits: u32) -> Vec<Self> {
        if char_bits + rank_bits > 64 || ctx.tune.force_wide {
            // By the key alone: among mod-0 records it orders as the comparison does.
            v.par_sort_unstable_by_key(|r| (r.head[0], r.r[MOD0_SLOT]));
            return v;
        }
        sort_by_key_via_index(v, ctx.sorter.as_ref(), Some(char_bits + rank_bits), |r| {
            (r.head[0] << rank_bits) | r.r[MOD0_SLOT]
        })
    }
}

/// The slot of rank[i+1] in a mod-0 record: the mod-0 group's key is (t[i], rank[i+1]) (checked
/// against the cover's table in the tests).
const MOD0_SLOT: usize = 0;

radix_by_key!(
    /// A narrow mod-0 merge record, radix-sorted by (t[i], rank[i+1]) as one 64-bit key.
    Mod0Rec32(Rec32),
    |r| ((r.head[0] as u64) << 32) | r.r[MOD0_SLOT] as u64
);

/// The record widths of a DC3 level.
trait Dc3Width: Width {
    type R: Dc3Record<Cover = Dc3>;
}

impl Dc3Width for Narrow {
    type R = Rec32;
}

impl Dc3Width for Wide {
    type R = Rec64;
}

#[cfg(test)]
mod tests {
    use super::super::merge::MergeRecord;
    use super::*;

    #[test]
    fn mod0_key_is_the_group_key() {
        assert_eq!(Dc3::group_key(0), (1, MOD0_SLOT));
    }

    /// The keyed sort of wide mod-0 records (n ≥ 2^32 only) orders as the comparison does.
    #[test]
    fn wide_mod0_keyed_sort_is_the_comparison_order() {
        let mut rng = crate::dist::sample_sort::SplitMix::new(7);
        let m = 5000u64;
        let mut ranks: Vec<u64> = (1..=2 * m).collect();
        for j in (1..ranks.len()).rev() {
            ranks.swap(j, (rng.next() % (j as u64 + 1)) as usize);
        }
        let v: Vec<Rec64> = (0..m)
            .map(|k| {
                let c = [1 + rng.next() % 4, 1 + rng.next() % 4];
                let r = [ranks[2 * k as usize], ranks[2 * k as usize + 1]];
                Rec64::new(3 * k, c, |s| r[s])
            })
            .collect();
        let mut want = v.clone();
        want.sort();
        let sorter = crate::local::cpu::CpuSort::new(2);
        let got = sort_by_key_via_index(v, &sorter, Some(3 + 14), |r| {
            (r.head[0] << 14) | r.r[MOD0_SLOT]
        });
        assert_eq!(got, want);
    }
}
