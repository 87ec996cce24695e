//! pDC3 (Kulla & Sanders, "Scalable Parallel Suffix Array Construction", Fig. 1): the
//! difference-cover skeleton ([`super`]) with the cover {1, 2} mod 3 ([`Dc3`]).
//!
//! One level, for a text of n characters distributed in a [`Layout`]:
//! 1. **triples**: for each sample position i (i mod 3 ≠ 0, plus a dummy at n when n mod 3 = 1)
//!    the key (t[i], t[i+1], t[i+2], i) packed into one integer when it fits;
//! 2. **sort triples**: distributed sample sort (the position makes keys unique: balanced on aⁿ);
//! 3. **name**: flag key changes, global prefix sum; if all names differ they are the ranks.
//!    Where a triple packs into [`CODE_BITS`] bits (its characters numbered densely, at most 8
//!    bits each: texts of at most 255 distinct bytes, levels of at most 255 names) steps 1–3
//!    need no sort: the triples' codes are marked in a bitmap over all codes, or-ed over the
//!    pes, and a triple's name is 1 + the marked codes below its own ([`name_by_codes`];
//!    `--name-by-sort` sorts anyway);
//! 4. otherwise **recurse** (distributed) on the string of names of the mod-1 positions followed by
//!    the mod-2 positions (stored in bytes, 16 bits or an index width: the narrowest that holds
//!    the names), and turn its suffix array into ranks; after a sort, samples whose triple is
//!    unique may leave the recursion with their names as ranks (discarding, see [`super`]);
//! 5. **ranks to text order**: every sample rank goes to the pe that owns its position;
//! 6. **merge**: records (t[i], t[i+1], the ranks of the two sample positions among i..i+2, i)
//!    sorted with the paper's comparison (sample vs sample by rank, otherwise by one or two
//!    characters and a rank): samples placed by rank, mod-0 suffixes radix-sorted by
//!    (t[i], rank[i+1]), one linear merge;
//! 7. **suffix array**: the positions in sorted order; at the top level rebalanced to the input
//!    layout (a recursion level only needs each entry's global index).
//!
//! A (sub)problem of at most `config.base_case` characters — a recursion level also at most half
//! the text's largest block (`ctx::Settings::gathers`) — is gathered on pe 0 and solved by
//! libsais (see [`super::super::seq`]); larger ones recurse in parallel, so no pe ever holds much more than
//! its share of any level.
//!
//! Memory per level (records per pe ≈ n/p): triples 8–32 B each, merge records 16 B each where
//! the two characters pack into one index ([`super::merge::Packed2`]), else 20 B (25 or 20 B
//! when a level's positions do not fit 32 bits, 40 or 32 B past 40 bits: see [`crate::index`]), with up
//! to two copies of one kind alive during its exchange; in `merge_rounds` key ranges only one
//! range's records at a time (see [`super`]).

use bytemuck::{Pod, Zeroable};

use super::cover::{Cover, Dc3};
use super::merge::{merge, radix_sort_group, sort_group, Head, Packed2, Rec};
use super::{
    bits, index_width, name_by_codes, name_pairs, name_samples, sample_ranks, Chars, Level, Named,
    Phases, SampleKey, SampleSource, Samples, SortedPart, Symbol, Tok, CODE_BITS,
};
use crate::algo::sink::SaSink;
use crate::ctx::Settings;
use crate::dist::{scramble, unscramble, Layout, SortKey};
use crate::index::{Index, IndexWidth, U40};
use crate::local::LocalSort;
use crate::token::{Token, TokenWidth};
use crate::Ctx;

pub(super) const PHASES: Phases = Phases {
    sample_keys: "triples",
    sort_samples: "sort triples",
    name_samples: "name",
    sort_groups: "sort mod-0",
    bare_top: true,
};

/// Builds the suffix array with pDC3. Collective. Entry: each pe holds its slice of the text as
/// given by `layout`. Exit: each pe holds SA entries for the same range, or (a `sink` that
/// writes) has written its entries into the output file as they became final and gets None.
/// A text of tokens wider than a byte ([`Token`]) is a level of [`Tok`] characters.
#[must_use]
pub fn dc3<T: Token>(
    ctx: &Ctx,
    set: &Settings,
    text: &[T],
    layout: &Layout,
    sink: &SaSink,
) -> Option<Vec<u64>> {
    let lv = Level::top(set, &PHASES);
    let part = match T::WIDTH {
        TokenWidth::W1 => level_to::<u8>(ctx, lv, bytemuck::cast_slice(text), layout, sink),
        _ => level_to(ctx, lv, Tok::wrap(text), layout, sink),
    };
    SortedPart::into_sink(part, ctx, layout, sink)
}

/// One DC3 level (`lv`) on a text of `layout.len()` characters, also the skeleton's recursion
/// (for DC7 too). Its suffix array goes to `sink` as it becomes final (None: written to the file
/// at level 0, or handed to the level above), or with a sink that holds is returned sorted across
/// pes but not rebalanced (the caller decides whether it needs the input's layout).
pub(super) fn level_to<C: Symbol>(
    ctx: &Ctx,
    lv: Level,
    t: &[C],
    layout: &Layout,
    sink: &SaSink,
) -> Option<SortedPart> {
    let n = layout.len();
    let first = layout.start(ctx.comm.rank()) as u64;
    if lv.gathers(ctx, n) {
        let sa = ctx.phase("base case", || base_case(ctx, lv, t, layout));
        return SortedPart::new(sa, first).deliver_to(ctx, sink);
    }
    if let Some(sa) = lv.offload().level(ctx, lv.depth, t, layout) {
        return SortedPart::new(sa, first).deliver_to(ctx, sink);
    }
    let (chars, set) = ctx.phase("halo", || {
        (Chars::new(ctx, t, layout, 2), CharSet::of(ctx, t))
    });
    let smp = Samples::<Dc3>::new(n, true);
    // Positions up to n (the dummy), ranks up to the samples + 1.
    let largest = (n as u64 + 2).max(set.largest);
    match index_width(ctx, largest) {
        IndexWidth::W32 => level_with::<C, u32>(ctx, lv, layout, &chars, &set, &smp, sink),
        IndexWidth::W40 => level_with::<C, U40>(ctx, lv, layout, &chars, &set, &smp, sink),
        IndexWidth::W64 => level_with::<C, u64>(ctx, lv, layout, &chars, &set, &smp, sink),
    }
}

/// The characters of a level: the largest value, and where no value exceeds a byte's (256)
/// their dense numbering, `dense[v]` = the number of values in 1..=v present in the whole level
/// (0 past the end), so that a triple's code takes 3 · bits(σ) bits for σ values present (DNA 9,
/// English 21: [`name_by_codes`]).
struct CharSet {
    largest: u64,
    dense: Option<Vec<u64>>,
}

impl CharSet {
    /// Collective (one reduction of the largest value, one of 257 bits where it is at most 256).
    fn of<C: Symbol>(ctx: &Ctx, t: &[C]) -> CharSet {
        let mut present = [0u64; 5];
        let mut most = 0;
        for &c in t {
            let v = c.val();
            most = most.max(v);
            if v <= 256 {
                present[(v >> 6) as usize] |= 1 << (v & 63);
            }
        }
        let largest = ctx.comm.all_reduce_max(most);
        let dense = (largest <= 256).then(|| {
            ctx.comm.all_reduce_or_vec(&mut present);
            let mut seen = 0;
            (0..=256u64)
                .map(|v| {
                    seen += v.min(1) * (present[(v >> 6) as usize] >> (v & 63) & 1);
                    seen
                })
                .collect()
        });
        CharSet { largest, dense }
    }
}

/// Steps 1–6 of a level in the index width `I`.
fn level_with<C: Symbol, I: Index>(
    ctx: &Ctx,
    lv: Level,
    layout: &Layout,
    chars: &Chars<C>,
    set: &CharSet,
    smp: &Samples<Dc3>,
    sink: &SaSink,
) -> Option<SortedPart> {
    let alphabet = set.largest;
    // Positions up to n − 1, or n with the dummy.
    let (bc, bi) = (
        bits(alphabet),
        bits((layout.len() + usize::from(smp.dummy)) as u64),
    );
    // --force-wide takes the path of huge names: triples field by field.
    let tb = if ctx.config.force_wide {
        u32::MAX
    } else {
        3 * bc + bi
    };
    // Codes of dense characters where they fit a byte, else of the values themselves.
    let (dense, bd) = match &set.dense {
        Some(d) => (Some(d), bits(d[256])),
        None => (None, bc),
    };
    let named = if 3 * bd <= CODE_BITS && !ctx.config.dcx.name_by_sort && !ctx.config.force_wide {
        let at = |i: usize| {
            let c = chars.at(i);
            dense.map_or(c, |d| d[c as usize])
        };
        let code = |i: usize| (at(i) << (2 * bd)) | (at(i + 1) << bd) | at(i + 2);
        name_by_codes::<Dc3, I>(ctx, layout, smp, 3 * bd, code, lv)
    } else if tb <= 64 {
        name_triples::<u64, I, C>(ctx, lv, layout, chars, smp, (bc, bi))
    } else if tb <= 128 {
        name_triples::<u128, I, C>(ctx, lv, layout, chars, smp, (bc, bi))
    } else {
        name_triples::<Triple<I>, I, C>(ctx, lv, layout, chars, smp, (bc, bi))
    };
    let rank = sample_ranks::<Dc3, I>(ctx, lv, layout, smp, named);
    merge_by_chars::<I, C>(ctx, lv, layout, chars, alphabet, rank, sink)
}

/// Finishes a suffix array from order-consistent prefix names, for pCSS when prefix doubling
/// stops paying off. `name_of[j]` is the name of position `lo + j`: the number of suffixes whose
/// first h characters are smaller, for some h ≥ 4, where a suffix shorter than h has a name of
/// its own. Such names may stand in for DC3's triple names: the recursion on the names of the
/// sample positions gives their ranks, and the merge finishes the job. (h ≥ 4 makes the last
/// mod-1 name unique, so no dummy sample is needed.) The names are freed once the samples have
/// taken theirs. Collective; exit as [`dc3`].
#[must_use]
pub fn finish_from_names<N: Index>(
    ctx: &Ctx,
    set: &Settings,
    text: &[u8],
    layout: &Layout,
    name_of: Vec<N>,
    sink: &SaSink,
) -> Option<Vec<u64>> {
    let lv = Level::top(set, &PHASES);
    // Names up to n (+ 1), positions below n, ranks up to the samples + 1.
    match index_width(ctx, layout.len() as u64 + 3) {
        IndexWidth::W32 => finish_with::<u32, N>(ctx, lv, text, layout, name_of, sink),
        IndexWidth::W40 => finish_with::<U40, N>(ctx, lv, text, layout, name_of, sink),
        IndexWidth::W64 => finish_with::<u64, N>(ctx, lv, text, layout, name_of, sink),
    }
}

fn finish_with<I: Index, N: Index>(
    ctx: &Ctx,
    lv: Level,
    text: &[u8],
    layout: &Layout,
    name_of: Vec<N>,
    sink: &SaSink,
) -> Option<Vec<u64>> {
    let smp = Samples::<Dc3>::new(layout.len(), false);
    let pairs = name_pairs::<Dc3, I, N>(ctx, layout, &smp, &name_of);
    drop(name_of);
    let rank = sample_ranks::<Dc3, I>(ctx, lv, layout, &smp, Named::plain(pairs, false));
    let chars = Chars::new(ctx, text, layout, 2);
    let alphabet = largest_char(ctx, text);
    let part = merge_by_chars::<I, u8>(ctx, lv, layout, &chars, alphabet, rank, sink);
    SortedPart::into_sink(part, ctx, layout, sink)
}

/// The largest character value of the whole text. Collective (one reduction).
fn largest_char<C: Symbol>(ctx: &Ctx, t: &[C]) -> u64 {
    ctx.comm
        .all_reduce_max(t.iter().map(|&c| c.val()).max().unwrap_or(0))
}

/// Steps 1–3: builds the triple of every sample position of this pe (and the dummy on the last
/// pe), sorts and names them ([`Named`]). Collective.
fn name_triples<K: TripleKey, I: Index, C: Symbol>(
    ctx: &Ctx,
    lv: Level,
    layout: &Layout,
    chars: &Chars<C>,
    smp: &Samples<Dc3>,
    (bc, bi): (u32, u32),
) -> Named<I> {
    let comm = &ctx.comm;
    let me = comm.rank();
    let n = layout.len();
    let at = |i: usize| chars.at(i);
    let source = SampleSource {
        lo: layout.start(me),
        hi: layout.end(me),
        key: |i: usize| K::pack([at(i), at(i + 1), at(i + 2)], i as u64, bc, bi),
        dummy: (smp.dummy && me == comm.size() - 1).then(|| K::pack([0, 0, 0], n as u64, bc, bi)),
    };
    name_samples(ctx, n, smp, source, bi, lv)
}

/// Step 6 with heads of two characters from `chars`.
fn merge_by_chars<I: Index, C: Symbol>(
    ctx: &Ctx,
    lv: Level,
    layout: &Layout,
    chars: &Chars<C>,
    alphabet: u64,
    rank: Vec<I>,
    sink: &SaSink,
) -> Option<SortedPart> {
    let n = layout.len();
    let samples = n - n.div_ceil(3);
    let bits = (bits(alphabet), bits(samples as u64 + 1));
    let at = |i: usize| chars.at(i);
    if bits.0 <= Packed2::<I>::HALF && !ctx.config.force_wide {
        // Both characters in one index.
        let head = |i: usize| Packed2::<I>::new(at(i), at(i + 1));
        merge_heads(ctx, lv, layout, rank, &head, bits, sink)
    } else {
        let head = |i: usize| [at(i), at(i + 1)].map(I::from_u64);
        merge_heads(ctx, lv, layout, rank, &head, bits, sink)
    }
}

/// Step 6 with the heads `head(i)`; `(char_bits, rank_bits)` for the sort of the mod-0 records.
/// The heads come through a reference to a function object, so that the merge is compiled once
/// per head and width, not once more for every type of a level's characters (two calls of it
/// per position cost nothing measurable).
fn merge_heads<H: Head, I: Index>(
    ctx: &Ctx,
    lv: Level,
    layout: &Layout,
    rank: Vec<I>,
    head: &(dyn Fn(usize) -> H + Sync),
    (char_bits, rank_bits): (u32, u32),
    sink: &SaSink,
) -> Option<SortedPart> {
    let sort = |v| sort_mod0(ctx, v, char_bits, rank_bits);
    merge::<Dc3, H, I, { Dc3::KINDS }>(ctx, layout, rank, head, lv, sort, sink)
}

/// A DC3 merge record: two characters (packed into one index where they fit, [`Packed2`]), the
/// ranks of i + 1 and i + 2 (mod-0: slots of 1 and 2; …), the position: 20, 25 or 40 bytes
/// (16, 20 or 32 packed).
type Dc3Rec<H, I> = Rec<Dc3, H, I>;

/// Sorts one pe's mod-0 records by (t[i], rank[i+1]) (`char_bits` bits for a character,
/// `rank_bits` for a rank): 32-bit records by a radix sort of the records, wider ones through
/// their keys ([`sort_group`]). Local.
fn sort_mod0<H: Head, I: Index>(
    ctx: &Ctx,
    v: Vec<Dc3Rec<H, I>>,
    char_bits: u32,
    rank_bits: u32,
) -> Vec<Dc3Rec<H, I>> {
    if I::BITS == 32 {
        radix_sort_group(v, ctx.sorter.as_ref())
    } else {
        sort_group(
            v,
            ctx.sorter.as_ref(),
            char_bits,
            rank_bits,
            ctx.config.force_wide,
        )
    }
}

/// Gathers the whole (small) text on pe 0, solves it there and sends each pe its part. The other
/// pes wait asleep meanwhile, so pe 0 runs libsais on all the CPUs of its node's pes.
///
/// The text and the parts move by point-to-point messages to and from pe 0
/// ([`crate::comm::Comm::stream_to_root`], [`crate::comm::Comm::stream_from_root`]): p − 1
/// messages each way, where an all-to-all takes p² steps in all.
fn base_case<C: Symbol>(ctx: &Ctx, lv: Level, t: &[C], layout: &Layout) -> Vec<u64> {
    let comm = &ctx.comm;
    let mut all: Vec<C> = Vec::new();
    if comm.rank() == 0 {
        all.reserve_exact(layout.len());
    }
    comm.stream_to_root(t, 0, usize::MAX, None, |_, piece| {
        all.extend_from_slice(piece)
    });
    let sa = match comm.rank() {
        0 => solve_gathered(ctx, lv, &all),
        _ => Vec::new(),
    };
    drop(all);
    if comm.size() > 1 {
        comm.quiet_barrier();
    }
    let mut part = vec![0u64; layout.local_len(comm.rank())];
    comm.stream_from_root(&mut part, 0, usize::MAX, None, |dst, at, piece| {
        let from = layout.start(dst) + at;
        piece.copy_from_slice(&sa[from..from + piece.len()]);
    });
    part
}

/// pe 0's half of [`base_case`]: the suffix array of the gathered text, on the level's device
/// where it takes it, else by libsais with the node's CPUs.
fn solve_gathered<C: Symbol>(ctx: &Ctx, lv: Level, all: &[C]) -> Vec<u64> {
    let _wide = crate::affinity::widen(&ctx.node_cpus);
    let threads = crate::affinity::count(&ctx.node_cpus).max(ctx.config.threads);
    let t0 = std::time::Instant::now();
    if let Some(sa) = lv.offload().gathered(ctx, all) {
        log::debug!(
            "base case: {} characters on the {} backend: {:.3} s",
            all.len(),
            ctx.sorter.name(),
            t0.elapsed().as_secs_f64()
        );
        return sa;
    }
    let sa = C::sequential_sa(all, threads);
    log::debug!(
        "base case: {} characters (largest {}), libsais with {threads} threads on {} CPUs: {:.3} s",
        all.len(),
        all.iter().map(|c| c.val()).max().unwrap_or(0),
        crate::affinity::count(&crate::affinity::current()),
        t0.elapsed().as_secs_f64()
    );
    sa
}

/// A sort record for a triple of characters and its position, packed so that integer order is
/// (c0, c1, c2) order, equal triples in the order of their [`scramble`]d positions (spread over
/// the pes and key ranges).
trait TripleKey: SampleKey {
    fn pack(c: [u64; 3], i: u64, bc: u32, bi: u32) -> Self;
}

impl TripleKey for u64 {
    #[inline]
    fn pack(c: [u64; 3], i: u64, bc: u32, bi: u32) -> Self {
        ((((c[0] << bc) | c[1]) << bc | c[2]) << bi) | scramble(i, bi)
    }
}

impl SampleKey for u64 {
    #[inline]
    fn same_chars(&self, o: &Self, bi: u32) -> bool {
        (self >> bi) == (o >> bi)
    }
    #[inline]
    fn index(&self, bi: u32) -> u64 {
        unscramble(*self, bi)
    }
}

impl TripleKey for u128 {
    #[inline]
    fn pack(c: [u64; 3], i: u64, bc: u32, bi: u32) -> Self {
        let c = [c[0] as u128, c[1] as u128, c[2] as u128];
        ((((c[0] << bc) | c[1]) << bc | c[2]) << bi) | scramble(i, bi) as u128
    }
}

impl SampleKey for u128 {
    #[inline]
    fn same_chars(&self, o: &Self, bi: u32) -> bool {
        (self >> bi) == (o >> bi)
    }
    #[inline]
    fn index(&self, bi: u32) -> u64 {
        unscramble(*self as u64, bi)
    }
}

/// A triple that does not fit 128 bits (names above 2^29 or so), field by field: 32, 20 or 16
/// bytes in the level's index width.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Triple<I> {
    c: [I; 3],
    i: I,
}

// SAFETY: repr(C) of four fields of one Pod type: no padding.
unsafe impl<I: Index> Zeroable for Triple<I> {}
unsafe impl<I: Index> Pod for Triple<I> {}

impl<I: Index> SortKey for Triple<I> {
    fn sort_local(v: &mut [Self], _sorter: &dyn LocalSort) {
        crate::dist::sample_sort::par_sort(v);
    }
}

impl<I: Index> TripleKey for Triple<I> {
    fn pack(c: [u64; 3], i: u64, _bc: u32, _bi: u32) -> Self {
        Triple {
            c: c.map(I::from_u64),
            i: I::from_u64(i),
        }
    }
}

impl<I: Index> SampleKey for Triple<I> {
    fn same_chars(&self, o: &Self, _bi: u32) -> bool {
        self.c == o.c
    }
    fn index(&self, _bi: u32) -> u64 {
        self.i.to_u64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mod-0 records with distinct ranks (as in a level), in every index width.
    fn mod0_records<H: Head, I: Index>(
        m: u64,
        sigma: u64,
        head: impl Fn([u64; 2]) -> H,
    ) -> Vec<Dc3Rec<H, I>> {
        let mut rng = crate::util::SplitMix::new(7);
        let mut ranks: Vec<u64> = (1..=2 * m).collect();
        for j in (1..ranks.len()).rev() {
            ranks.swap(j, (rng.next() % (j as u64 + 1)) as usize);
        }
        (0..m)
            .map(|k| {
                let c = [1 + rng.next() % sigma, 1 + rng.next() % sigma];
                let r = [ranks[2 * k as usize], ranks[2 * k as usize + 1]];
                Rec::new(3 * k, head(c), |s| r[s])
            })
            .collect()
    }

    /// Every local sort of mod-0 records (radix sort of the records, keyed sort, comparison)
    /// orders as the comparison does, in every width, with the characters in two indices and
    /// packed into one.
    fn mod0_sorts_are_the_comparison_order<I: Index>() {
        for sigma in [1, 4, 300] {
            mod0_sorts_order::<[I; 2], I>(sigma, |c| c.map(I::from_u64));
            mod0_sorts_order::<Packed2<I>, I>(sigma, |c| Packed2::new(c[0], c[1]));
        }
    }

    fn mod0_sorts_order<H: Head, I: Index>(sigma: u64, head: impl Fn([u64; 2]) -> H) {
        let sorter = crate::local::cpu::CpuSort::new(2);
        let m = 5000;
        let rank_bits = bits(2 * m + 1);
        let v = mod0_records::<H, I>(m, sigma, head);
        let mut want = v.clone();
        want.sort();
        let char_bits = bits(sigma);
        for by_comparison in [false, true] {
            let got = sort_group(v.clone(), &sorter, char_bits, rank_bits, by_comparison);
            assert_eq!(got, want, "{} bits, sigma {sigma}", I::BITS);
        }
        if I::BITS + char_bits <= 64 {
            assert_eq!(radix_sort_group(v.clone(), &sorter), want);
        }
    }

    #[test]
    fn mod0_sorts_in_every_width() {
        mod0_sorts_are_the_comparison_order::<u32>();
        mod0_sorts_are_the_comparison_order::<U40>();
        mod0_sorts_are_the_comparison_order::<u64>();
    }

    #[test]
    fn records_and_triples_have_no_padding() {
        use std::mem::size_of;
        assert_eq!(size_of::<Dc3Rec<[u32; 2], u32>>(), 20);
        assert_eq!(size_of::<Dc3Rec<[U40; 2], U40>>(), 25);
        assert_eq!(size_of::<Dc3Rec<[u64; 2], u64>>(), 40);
        assert_eq!(size_of::<Dc3Rec<Packed2<u32>, u32>>(), 16);
        assert_eq!(size_of::<Dc3Rec<Packed2<U40>, U40>>(), 20);
        assert_eq!(size_of::<Dc3Rec<Packed2<u64>, u64>>(), 32);
        assert_eq!(size_of::<Triple<u32>>(), 16);
        assert_eq!(size_of::<Triple<U40>>(), 20);
        assert_eq!(size_of::<Triple<u64>>(), 32);
    }
}
