//! DC7: the difference-cover skeleton ([`super`]) with the cover D = {1, 2, 4} of Z_7 ([`Dc7`];
//! Kärkkäinen–Sanders–Burkhardt's DCX with X = 7, as in Distributed DCX by Haag, Kurpicz, Sanders
//! and Schimek): a recursion on 3/7 of the positions instead of DC3's 2/3. pCSS uses it where
//! most suffixes share long prefixes, in two ways:
//!
//! - **from the text** ([`dc7`]), when pCSS predicts that doubling would crawl: the samples are
//!   named by their 7-character windows (one sample sort of 3n/7 records: **sample keys**,
//!   **sort samples**, **name samples**), a dummy sample at n ending class 1 or 2 when n mod 7 is
//!   1 or 2; the merge records carry t[i..i+6) packed (9 bits per character) and compare up to
//!   6 characters and a rank;
//! - **from prefix names** ([`finish_from_names`]), when doubling stalls: pCSS holds for every
//!   position i a name, the number of suffixes whose first h characters are smaller, for a depth
//!   h ≥ k ≥ 8 of i's group, where a suffix shorter than its depth has a name of its own. Names
//!   cover ≥ 8 > 7 characters, so a sample's name stands for its window, and the last sample of
//!   each class (at most 7 characters before the end) is shorter than its depth, so its name is
//!   unique: no dummy samples are needed. The merge records carry the name.
//!
//! Then, as the skeleton: the **recursion** (the names of the positions i mod 7 = 1, then 2, then
//! 4, solved by the distributed pDC3, [`super::dc3`]) gives every sample its rank; **ranks to text
//! order**; the **merge**: for i mod 7 = a and j mod 7 = b there is an l < 7 with a + l and b + l
//! both in D; suffix i < suffix j iff (first l characters or name of i, rank(i+l)) <
//! (the same of j). Samples are placed by rank, the other residues are sorted in two groups that
//! share an offset l (0 and 3 by (head, rank(i+1)), 5 and 6 by (head, rank(i+3))) in the phase
//! **sort others**, and the three sorted lists are merged.
//!
//! Against DC3 on the same names ([`super::dc3::finish_from_names`]) the recursion is 3/7 n
//! instead of 2/3 n characters (and with it every deeper level), for merge records of the same 20
//! bytes (a name and three ranks instead of two characters and two ranks); on texts that are not
//! repetitive its merge is heavier than DC3's.

use bytemuck::{Pod, Zeroable};

use super::cover::{Cover, Dc7};
use super::merge::{merge, radix_sort_group, sort_group, Head, Name, Rec};
use super::{
    bits, index_width, map_maybe_par, name_pairs, name_samples, sample_ranks, Chars, Level, Named,
    Phases, SampleKey, SampleSource, Samples, SortedPart,
};
use crate::algo::sink::SaSink;
use crate::ctx::Settings;
use crate::dist::{scramble, unscramble, Layout, SortKey};
use crate::index::{Index, IndexWidth, U40};
use crate::local::LocalSort;
use crate::Ctx;

const PHASES: Phases = Phases {
    sample_keys: "sample keys",
    sort_samples: "sort samples",
    name_samples: "name samples",
    sort_groups: "sort others",
    bare_top: false,
};

/// The period.
const X: usize = Dc7::X;

/// Bits per character in packed windows: byte + 1, 0 past the end.
const CB: u32 = 9;

/// Builds the suffix array of a byte text with DC7 from the start (see the module doc). For
/// texts where most suffixes share long prefixes (pCSS predicts these). Collective; same
/// contract as [`super::dc3::dc3`].
#[must_use]
pub fn dc7(
    ctx: &Ctx,
    set: &Settings,
    text: &[u8],
    layout: &Layout,
    sink: &SaSink,
) -> Option<Vec<u64>> {
    let lv = Level::top(set, &PHASES);
    if layout.len() <= X + 1 || lv.gathers(ctx, layout.len()) {
        return super::dc3::dc3(ctx, set, text, layout, sink);
    }
    match index_width(ctx, layout.len() as u64 + 2) {
        IndexWidth::W32 => from_text::<u32>(ctx, lv, text, layout, sink),
        IndexWidth::W40 => from_text::<U40>(ctx, lv, text, layout, sink),
        IndexWidth::W64 => from_text::<u64>(ctx, lv, text, layout, sink),
    }
}

/// [`dc7`] with every pe keeping its part, the knobs as configured (for tests and benchmarks).
/// Collective.
#[must_use]
pub fn dc7_held(ctx: &Ctx, text: &[u8], layout: &Layout) -> Vec<u64> {
    let knobs = crate::config::Knobs::configured(&ctx.config);
    let set = Settings::of_text(ctx, knobs, layout, text.len());
    dc7(ctx, &set, text, layout, &SaSink::hold()).expect("a sink that holds returns the part")
}

fn from_text<I: Index>(
    ctx: &Ctx,
    lv: Level,
    text: &[u8],
    layout: &Layout,
    sink: &SaSink,
) -> Option<Vec<u64>> {
    let smp = Samples::<Dc7>::new(layout.len(), true);
    let chars = ctx.phase("halo", || Chars::new(ctx, text, layout, X - 1));
    // The last sample of each class (the dummy, if any, included) reaches past the end: its
    // window is unique, so it separates the classes.
    let me = ctx.comm.rank();
    let source = SampleSource {
        lo: layout.start(me),
        hi: layout.end(me),
        key: |i: usize| WindowKey::new(window(&chars, i), i),
        dummy: (smp.dummy && me == ctx.comm.size() - 1).then(|| WindowKey::new(0, layout.len())),
    };
    let named = name_samples::<Dc7, WindowKey, I>(ctx, layout.len(), &smp, source, 64, lv);
    let rank = sample_ranks::<Dc7, I>(ctx, lv, layout, &smp, named);
    // The groups' keys: (first l ≤ 3 characters, rank).
    let (head_bits, rank_bits) = (CB * GROUP_OFFSET_MAX, bits(layout.len() as u64 + 1));
    merge_all::<Window, I>(
        ctx,
        lv,
        layout,
        rank,
        |i| Window::at(&chars, i),
        |v| {
            sort_group(
                v,
                ctx.sorter.as_ref(),
                head_bits,
                rank_bits,
                ctx.config.force_wide,
            )
        },
        sink,
    )
}

/// Builds the suffix array from prefix names (see the module doc for what `name_of` must hold:
/// `name_of[j]` is the name of position `lo + j`, of depth ≥ 8). The names are freed once the
/// merge records are built. Collective; exit as [`super::dc3::dc3`].
#[must_use]
pub fn finish_from_names<N: Index>(
    ctx: &Ctx,
    set: &Settings,
    layout: &Layout,
    name_of: Vec<N>,
    sink: &SaSink,
) -> Option<Vec<u64>> {
    let lv = Level::top(set, &PHASES);
    match index_width(ctx, layout.len() as u64 + 2) {
        IndexWidth::W32 => from_names::<u32, N>(ctx, lv, layout, name_of, sink),
        IndexWidth::W40 => from_names::<U40, N>(ctx, lv, layout, name_of, sink),
        IndexWidth::W64 => from_names::<u64, N>(ctx, lv, layout, name_of, sink),
    }
}

fn from_names<I: Index, N: Index>(
    ctx: &Ctx,
    lv: Level,
    layout: &Layout,
    name_of: Vec<N>,
    sink: &SaSink,
) -> Option<Vec<u64>> {
    let lo = layout.start(ctx.comm.rank());
    let smp = Samples::<Dc7>::new(layout.len(), false);
    let pairs = name_pairs::<Dc7, I, N>(ctx, layout, &smp, &name_of);
    // The names in the level's width (they fit it) for the merge, through the recursion.
    let narrow: Vec<I> = map_maybe_par(&name_of, |_, &x| I::from_u64(x.to_u64()));
    drop(name_of);
    let name_of = narrow;
    let rank = sample_ranks::<Dc7, I>(ctx, lv, layout, &smp, Named::plain(pairs, false));
    let bits = bits(layout.len() as u64 + 1);
    merge_all::<Name<I>, I>(
        ctx,
        lv,
        layout,
        rank,
        move |i| Name(name_of[i - lo]),
        |v| sort_by_names(ctx, v, bits),
        sink,
    )
}

/// The skeleton's merge with DC7's records, the head of position i from `head(i)` (a packed
/// window or a name; dropped once the records are built), each group sorted by `sort_group`,
/// rebalanced to `layout` or written by `sink`. Collective.
fn merge_all<H: Head, I: Index>(
    ctx: &Ctx,
    lv: Level,
    layout: &Layout,
    rank: Vec<I>,
    head: impl Fn(usize) -> H + Sync,
    sort_group: impl Fn(Vec<Dc7Rec<H, I>>) -> Vec<Dc7Rec<H, I>>,
    sink: &SaSink,
) -> Option<Vec<u64>> {
    let part = merge::<Dc7, H, I, { Dc7::KINDS }>(ctx, layout, rank, head, lv, sort_group, sink);
    SortedPart::into_sink(part, ctx, layout, sink)
}

/// The window t[i..i+7) of sample position i, `CB` bits per character, big-endian (0 past the
/// end).
#[inline]
fn window(chars: &Chars<u8>, i: usize) -> u64 {
    (0..X).fold(0u64, |acc, j| (acc << CB) | chars.at(i + j))
}

/// A sample's sort record: [7-character window | scrambled position ([`scramble`])]. Sample sort splits by the whole integer (equal windows spread over pes, and a
/// key range that cuts a large group of them takes a pseudo-random part of every pe's), the
/// local sort looks at the window only (half the radix passes): naming needs equal windows
/// together, not in position order.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Pod, Zeroable)]
struct WindowKey(u128);

impl WindowKey {
    /// The key of sample position i with window w (the dummy: window 0 at n).
    #[inline]
    fn new(w: u64, i: usize) -> Self {
        WindowKey(u128::from(w) << 64 | u128::from(scramble(i as u64, 64)))
    }
}

impl SortKey for WindowKey {
    fn sort_local(v: &mut [Self], sorter: &dyn LocalSort) {
        sorter.sort_u128_by_high(bytemuck::cast_slice_mut(v));
    }
}

impl SampleKey for WindowKey {
    #[inline]
    fn same_chars(&self, o: &Self, _bi: u32) -> bool {
        self.0 >> 64 == o.0 >> 64
    }
    #[inline]
    fn index(&self, _bi: u32) -> u64 {
        unscramble(self.0 as u64, 64)
    }
}

/// A merge head from the text: t[i..i+6) (`CB` bits per character, big-endian), so the first l
/// characters are `c >> (CB·(6 − l))`. Packed (alignment 1), so records of 40-bit fields have no
/// padding.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
struct Window(u64);

impl Window {
    /// The head of position i: t[i..i+6) from this pe's characters and halo.
    #[inline]
    fn at(chars: &Chars<u8>, i: usize) -> Self {
        Window((0..X - 1).fold(0u64, |acc, j| (acc << CB) | chars.at(i + j)))
    }
}

impl Head for Window {
    #[inline]
    fn prefix(&self, l: usize) -> u128 {
        (self.0 >> (CB as usize * (X - 1 - l))) as u128
    }
    #[inline]
    fn lead(&self) -> u128 {
        self.prefix(X - 1)
    }
}

/// A DC7 merge record: a window or a name, the ranks of the three sample positions among the
/// next seven, the position (from the text: 24, 28 or 40 bytes; from names: 20, 25 or 40).
type Dc7Rec<H, I> = Rec<Dc7, H, I>;

/// The largest offset of a group of non-sample residues (residues 5 and 6 by rank(i + 3)).
const GROUP_OFFSET_MAX: u32 = 3;

/// Sorts one pe's records of one group from names by (name, rank at the group's offset); names
/// and ranks take up to `bits` bits. Local.
fn sort_by_names<I: Index>(
    ctx: &Ctx,
    v: Vec<Dc7Rec<Name<I>, I>>,
    bits: u32,
) -> Vec<Dc7Rec<Name<I>, I>> {
    // A pe's records lie in one range of the final order and a name is the SA index of its
    // group's first member, so the names of one pe span little more than its share: a counting
    // sort by name and a sort of each (small) group of equal names by rank beats a radix sort of
    // 20-byte records (seven passes of moves).
    let (lo, hi) = v.iter().fold((u64::MAX, 0), |(a, b), r| {
        let x = r.head.0.to_u64();
        (a.min(x), b.max(x))
    });
    if v.len() >= 2 && (hi - lo) as usize <= 4 * v.len() && v.len() < u32::MAX as usize {
        return counting_sort_by_name(v, lo, hi);
    }
    if I::BITS == 32 {
        radix_sort_group(v, ctx.sorter.as_ref())
    } else {
        sort_group(v, ctx.sorter.as_ref(), bits, bits, ctx.config.force_wide)
    }
}

/// A counting sort by name (names in lo..=hi), then each group of equal names by rank. Local;
/// memory: 8 bytes per name of the range.
fn counting_sort_by_name<I: Index>(
    v: Vec<Dc7Rec<Name<I>, I>>,
    lo: u64,
    hi: u64,
) -> Vec<Dc7Rec<Name<I>, I>> {
    let bucket = |r: &Dc7Rec<Name<I>, I>| (r.head.0.to_u64() - lo) as usize;
    let mut start = vec![0u32; (hi - lo) as usize + 2];
    for r in v.iter() {
        start[bucket(r) + 1] += 1;
    }
    for j in 1..start.len() {
        start[j] += start[j - 1];
    }
    let mut out = vec![Dc7Rec::zeroed(); v.len()];
    let mut fill = start.clone();
    for r in v.iter() {
        let b = bucket(r);
        out[fill[b] as usize] = *r;
        fill[b] += 1;
    }
    let key = |r: &Dc7Rec<Name<I>, I>| r.rank(Dc7::group_key(r.residue()).1);
    for w in start.windows(2) {
        let g = &mut out[w[0] as usize..w[1] as usize];
        if g.len() > 1 {
            g.sort_unstable_by_key(key);
        }
    }
    out
}
