//! Step 4 of the skeleton: the merge of all suffixes by the sample ranks.
//!
//! Suffix i (residue a) against suffix j (residue b): with (l, s, t) = [`Cover::decide`]`(a, b)`,
//! compare the first l characters, then the rank of sample i + l (slot s of i's record) with the
//! rank of j + l (slot t of j's). A record carries what any such comparison needs: its first X − 1
//! characters or a name that stands for more (its [`Head`]) and the ranks of the |D| sample
//! positions among i..i+X, by slot.

use std::cmp::Ordering;

use bytemuck::{Pod, Zeroable};

use super::cover::Cover;
use super::{map_maybe_par, map_range_maybe_par, Level, SortedPart};
use crate::algo::sink::SaSink;
use crate::dist::{
    build_by_kind, exchange, gathered_sample, rebalance_into, release_freed, right_halo, scatter,
    snap_cuts, Layout, Ranges, RoundBounds, Select, SNAP,
};
use crate::index::Index;
use crate::local::LocalSort;
use crate::util::bits;
use crate::Ctx;

/// The first characters of a suffix in a merge record, or a name that stands for them.
pub(super) trait Head: Pod + Send + Sync {
    /// The first l characters (l < X) as one number: of two suffixes' heads, the smaller number
    /// has the smaller first l characters, and equal numbers equal ones (a name: itself, for
    /// every l). It fits 64 bits at the offsets of the cover's groups ([`Rec::group_key`]).
    fn prefix(&self, l: usize) -> u128;
    /// All the head holds as one number: of two suffixes, the one with the smaller lead is the
    /// smaller (characters past the end are 0, so a suffix that ends inside the head never leads
    /// one that goes on); equal leads mean equal heads, whose first l characters agree for every
    /// l < X (so the ranks decide).
    fn lead(&self) -> u128;
}

/// A prefix name: the number of suffixes whose first h characters are smaller, for an h of at
/// least X (pCSS' names). Equal names mean equal first X characters; different names order the
/// suffixes.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub(super) struct Name<I>(pub(super) I);

impl<I: Index> Head for Name<I> {
    #[inline]
    fn prefix(&self, _l: usize) -> u128 {
        self.0.to_u64() as u128
    }
    #[inline]
    fn lead(&self) -> u128 {
        self.0.to_u64() as u128
    }
}

/// A head of two characters t[i], t[i+1] (0 past the end).
impl<I: Index> Head for [I; 2] {
    /// l ≤ 2: the lead without its last 2 − l characters (none: 0).
    #[inline]
    fn prefix(&self, l: usize) -> u128 {
        debug_assert!(l <= 2);
        self.lead().checked_shr(64 * (2 - l as u32)).unwrap_or(0)
    }
    #[inline]
    fn lead(&self) -> u128 {
        ((self[0].to_u64() as u128) << 64) | self[1].to_u64() as u128
    }
}

/// A head of two characters t[i], t[i+1] (0 past the end) that each fit half of `I`'s bits,
/// packed into one `I`: t[i] in the high half. DC3's records at levels whose characters are that
/// small (a byte text, and a recursion level of fewer than 2^16 names at 32 bits) take 16 bytes
/// instead of 20 (20 instead of 25 at 40 bits, 32 instead of 40 at 64).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub(super) struct Packed2<I>(I);

impl<I: Index> Packed2<I> {
    /// The bits of one character.
    pub(super) const HALF: u32 = I::BITS / 2;

    /// The head of characters `c0` and `c1`, each below 2^[`Self::HALF`].
    #[inline]
    pub(super) fn new(c0: u64, c1: u64) -> Self {
        debug_assert!(c0 >> Self::HALF == 0 && c1 >> Self::HALF == 0);
        Packed2(I::from_u64(c0 << Self::HALF | c1))
    }
}

impl<I: Index> Head for Packed2<I> {
    /// l ≤ 2: the packed characters without the last 2 − l (none: 0, a shift by all of `I`'s
    /// bits, within a u128's).
    #[inline]
    fn prefix(&self, l: usize) -> u128 {
        debug_assert!(l <= 2);
        (self.0.to_u64() as u128) >> (Self::HALF * (2 - l as u32))
    }
    #[inline]
    fn lead(&self) -> u128 {
        self.0.to_u64() as u128
    }
}

/// A merge record of cover `C` in index width `I` (one definition for every cover, head and
/// width): the position i, its head, and the ranks of the sample positions
/// i + (D[s] − i) mod X for every slot s (0 past the end). Ordered by [`compare`]. No padding:
/// 20, 25 or 40 bytes for DC3 (two characters, two ranks; 16, 20 or 32 with [`Packed2`]), 20–40
/// for DC7.
#[repr(C)]
pub(super) struct Rec<C: Cover, H, I: Index> {
    pub(super) head: H,
    pub(super) r: C::Ranks<I>,
    pub(super) i: I,
}

impl<C: Cover, H: Head, I: Index> Rec<C, H, I> {
    /// The record of position i; `rank(s)` is the rank of the sample position of slot s.
    #[inline]
    pub(super) fn new(i: u64, head: H, rank: impl Fn(usize) -> u64) -> Self {
        const {
            assert!(
                size_of::<Self>() == size_of::<H>() + size_of::<C::Ranks<I>>() + size_of::<I>(),
                "a merge record without padding (it is Pod)"
            )
        };
        Rec {
            head,
            r: C::ranks(|s| I::from_u64(rank(s))),
            i: I::from_u64(i),
        }
    }
    #[inline]
    pub(super) fn pos(&self) -> u64 {
        self.i.to_u64()
    }
    /// The rank of the sample position of slot s.
    #[inline]
    pub(super) fn rank(&self, s: usize) -> u64 {
        self.r.as_ref()[s].to_u64()
    }
    #[inline]
    pub(super) fn residue(&self) -> usize {
        self.i.modulo(C::X as u32) as usize
    }
    /// The rank of i itself (i a sample position).
    #[inline]
    pub(super) fn own_rank(&self) -> u64 {
        self.rank(C::slot(self.residue()))
    }
    /// The key of a record of a group of non-sample residues: (first l characters, rank of
    /// i + l) for the group's offset l, with `rank_bits` bits for the rank. Orders the records
    /// of one group as [`compare`] does when it fits 64 bits.
    #[inline]
    pub(super) fn group_key(&self, rank_bits: u32) -> u64 {
        let (l, s) = C::ONE_GROUP.unwrap_or_else(|| C::group_key(self.residue()));
        let (h, r) = (self.head.prefix(l) as u64, self.rank(s));
        if rank_bits >= 64 {
            r
        } else {
            (h << rank_bits) | r
        }
    }
}

impl<C: Cover, H: Head, I: Index> Clone for Rec<C, H, I> {
    #[inline]
    fn clone(&self) -> Self {
        *self
    }
}
impl<C: Cover, H: Head, I: Index> Copy for Rec<C, H, I> {}
// SAFETY: repr(C) of Pod fields without padding (asserted in `new`, the only constructor besides
// `zeroed`); C is a marker.
unsafe impl<C: Cover, H: Head, I: Index> Zeroable for Rec<C, H, I> {}
unsafe impl<C: Cover, H: Head, I: Index> Pod for Rec<C, H, I> {}

impl<C: Cover, H: Head, I: Index> PartialEq for Rec<C, H, I> {
    fn eq(&self, o: &Self) -> bool {
        bytemuck::bytes_of(self) == bytemuck::bytes_of(o)
    }
}
impl<C: Cover, H: Head, I: Index> Eq for Rec<C, H, I> {}

impl<C: Cover, H: Head, I: Index> Ord for Rec<C, H, I> {
    #[inline]
    fn cmp(&self, o: &Self) -> Ordering {
        compare(self, o)
    }
}
impl<C: Cover, H: Head, I: Index> PartialOrd for Rec<C, H, I> {
    #[inline]
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl<C: Cover, H: Head, I: Index> std::fmt::Debug for Rec<C, H, I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ranks: Vec<u64> = (0..C::S).map(|s| self.rank(s)).collect();
        write!(f, "Rec {{ i: {}, ranks: {ranks:?} }}", self.pos())
    }
}

/// What two records are compared by (see the module doc): (first l characters, rank of the
/// sample position l on, position) of each, for (l, s, t) = [`Cover::decide`] of their residues.
/// The position breaks ties (there are none between different suffixes: one of two equal heads
/// ends first).
#[inline]
fn keys<C: Cover, H: Head, I: Index>(x: &Rec<C, H, I>, y: &Rec<C, H, I>) -> [(u128, u64, u64); 2] {
    let (l, s, t) = C::decide(x.residue(), y.residue());
    [
        (x.head.prefix(l), x.rank(s), x.pos()),
        (y.head.prefix(l), y.rank(t), y.pos()),
    ]
}

/// The DCX comparison of two suffixes by their records ([`keys`]).
#[inline]
pub(super) fn compare<C: Cover, H: Head, I: Index>(x: &Rec<C, H, I>, y: &Rec<C, H, I>) -> Ordering {
    let [a, b] = keys(x, y);
    a.cmp(&b)
}

/// Whether x orders before y ([`compare`]), computed without a branch: a merge takes from one
/// list or the other about at random, and a branch per comparison would be mispredicted about
/// every other time.
#[inline]
fn less<C: Cover, H: Head, I: Index>(x: &Rec<C, H, I>, y: &Rec<C, H, I>) -> bool {
    let [(h, r, p), (g, q, o)] = keys(x, y);
    (h < g) | ((h == g) & ((r < q) | ((r == q) & (p < o))))
}

/// A merge record radix-sorted by its [`Rec::group_key`] with `I::BITS` bits for the rank, which
/// orders one group of records as their comparison does while the head's keys stay below
/// 2^(64 − `I::BITS`) (32-bit records: characters and names). Its comparisons (the radix sort's
/// fall-backs on small buckets) use the key too.
#[repr(transparent)]
struct ByGroupKey<C: Cover, H: Head, I: Index>(Rec<C, H, I>);

impl<C: Cover, H: Head, I: Index> Clone for ByGroupKey<C, H, I> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<C: Cover, H: Head, I: Index> Copy for ByGroupKey<C, H, I> {}
// SAFETY: repr(transparent) over a Pod record.
unsafe impl<C: Cover, H: Head, I: Index> Zeroable for ByGroupKey<C, H, I> {}
unsafe impl<C: Cover, H: Head, I: Index> Pod for ByGroupKey<C, H, I> {}

impl<C: Cover, H: Head, I: Index> PartialEq for ByGroupKey<C, H, I> {
    fn eq(&self, o: &Self) -> bool {
        use voracious_radix_sort::Radixable;
        self.key() == o.key()
    }
}
impl<C: Cover, H: Head, I: Index> PartialOrd for ByGroupKey<C, H, I> {
    #[inline]
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        use voracious_radix_sort::Radixable;
        Some(self.key().cmp(&o.key()))
    }
}
impl<C: Cover, H: Head, I: Index> voracious_radix_sort::Radixable<u64> for ByGroupKey<C, H, I> {
    type Key = u64;
    #[inline]
    fn key(&self) -> u64 {
        self.0.group_key(I::BITS)
    }
}

/// Sorts one pe's records of one group by a radix sort of the records themselves by their group
/// key (see [`ByGroupKey`] for when that orders them right). Local.
pub(super) fn radix_sort_group<C: Cover, H: Head, I: Index>(
    mut v: Vec<Rec<C, H, I>>,
    sorter: &dyn LocalSort,
) -> Vec<Rec<C, H, I>> {
    radix_sort_local(
        bytemuck::cast_slice_mut::<_, ByGroupKey<C, H, I>>(&mut v),
        sorter,
    );
    v
}

/// Sorts one pe's records of one group of non-sample residues: through their group keys
/// ([`Rec::group_key`], [`sort_by_key_via_index`]) when `head_bits` for the first characters and
/// `rank_bits` for a rank fit 64 bits, by comparison otherwise or when `by_comparison` (the path
/// of huge inputs, forced by tests). Local.
pub(super) fn sort_group<C: Cover, H: Head, I: Index>(
    mut v: Vec<Rec<C, H, I>>,
    sorter: &dyn LocalSort,
    head_bits: u32,
    rank_bits: u32,
    by_comparison: bool,
) -> Vec<Rec<C, H, I>> {
    if by_comparison || head_bits + rank_bits > 64 {
        crate::dist::sample_sort::par_sort(&mut v);
        return v;
    }
    // The keys' actual width (often less: a group of offset 1 keys one character).
    sort_by_key_via_index(v, sorter, None, |r| r.group_key(rank_bits))
}

/// Sorts all suffixes of a level with the sample ranks; returns its suffix array, sorted across
/// pes. Collective.
///
/// Entry: `rank` holds the rank of every sample position of this pe's slice, in position order
/// (`sample_layout`);
/// `head(i)` gives the head of position i of this pe; `sort_group` sorts one pe's records of a
/// group of non-sample residues (the instance's local sort). Both are dropped once the last
/// round's records are built. Exit: this pe's range of the suffix array and its first index:
/// with one round about n/p entries, not rebalanced; with several, exactly this pe's part of
/// `layout` ([`SortedPart::placed`]). With a `sink` that writes (level 0 into the output file)
/// every pe writes each round's part at its SA index instead and gets None.
///
/// In the level's key ranges ([`Level::merge_rounds`], fewer at the top level of an instance
/// whose top holds nothing else, `Phases::bare_top`) of the final order ([`RoundBounds`],
/// from a sample of all records, each bound moved to a nearby sample record where there is one;
/// a sample position's round and pe follow from its rank against the bounds that are samples),
/// one after the other:
/// a round builds only its records (from the ranks and heads again), sends each to the pe of its
/// sub-range, places the samples by rank, sorts each group, merges, and sends the round's part
/// of the suffix array to its place in `layout` (or, into a sink's file, writes it at
/// `done + exscan(part)`: a round's records are the SA indices `done..done + total`); then its
/// records are freed.
///
/// Cost: one all-to-all per kind of record and round, n records in all; the samples are placed
/// by rank (no sort) and each group sorted locally; `rounds` passes building records (each
/// compared with its round's bounds), and with several rounds one more all-to-all of the suffix
/// array. Memory: the ranks (4–8 B per sample position, |D|/X of them) throughout; per round
/// its records (20–40 B per position / rounds) and, during one kind's exchange, a second copy of
/// that kind; with several rounds the level's suffix array in `layout` (8 B per position) unless
/// the sink writes it.
#[must_use]
pub(super) fn merge<C: Cover, H: Head, I: Index, const KINDS: usize>(
    ctx: &Ctx,
    layout: &Layout,
    rank: Vec<I>,
    head: impl Fn(usize) -> H + Sync,
    lv: Level,
    sort_group: impl Fn(Vec<Rec<C, H, I>>) -> Vec<Rec<C, H, I>>,
    sink: &SaSink,
) -> Option<SortedPart> {
    const { assert!(KINDS == C::KINDS) };
    let comm = &ctx.comm;
    let me = comm.rank();
    let n = layout.len();
    let phases = lv.phases;
    let mut rounds = lv.merge_rounds(n);
    // The sample positions among the X − 1 after this pe's slice: at most S.
    let halo = ctx.phase("merge records", || right_halo(comm, &rank, C::S));
    let (lo, hi) = (layout.start(me), layout.end(me));
    let mut src = Some(Source {
        lo,
        hi,
        first: C::samples_below(lo),
        end: C::samples_below(hi),
        rank,
        halo,
        head,
        round: Vec::new(),
    });
    if rounds > 1 {
        let s = src.as_mut().expect("the records' source");
        let record = |j| s.rec::<C, H>(s.lo + j);
        let bounds = RoundBounds::choose(ctx, Ranges::new(rounds), s.hi - s.lo, record, is_sample);
        rounds = bounds.rounds();
        // A sample position's round from its rank against the bounds that are samples (and a
        // comparison with any others between two of them: rare); another position's from its
        // head alone where no bound shares the head's lead, else from one rank per bound that
        // does. No record is made.
        s.round = ctx.phase("merge records", || {
            let exact = bounds.exact_keys(sample_rank);
            let leads = bounds.coarse_keys(|b| b.head.lead());
            map_range_maybe_par(hi - lo, |j| {
                let i = lo + j;
                let round = if C::kind(i % C::X) == 0 {
                    let at_most = |b: &Rec<C, H, I>| s.bound_below_or_at(b, i);
                    bounds.round_of_exact(&exact, s.rank_at::<C>(i), at_most)
                } else {
                    let at_most = |b: &Rec<C, H, I>| s.bound_at_most(b, i);
                    bounds.round_of_coarse(&leads, (s.head)(i).lead(), at_most)
                };
                round as u8
            })
        });
    }
    // With several rounds each round's part of the suffix array goes to its place at once: into
    // the sink's file, or into this pe's part of the layout.
    let hold = rounds > 1 && !sink.writes();
    let mut placed = vec![0u64; if hold { layout.local_len(me) } else { 0 }];
    let (mut done, mut samples_done) = (0u64, 0u64);
    for index in 0..rounds {
        let kinds: [Vec<Rec<C, H, I>>; KINDS] = ctx.phase("merge records", || {
            let s = src.as_ref().expect("the records' source");
            s.records(match rounds {
                1 => Select::All,
                _ => Select::Round {
                    of: &s.round,
                    this: index as u8,
                },
            })
        });
        if index + 1 == rounds {
            src = None; // the ranks, heads and rounds
        }
        let [total, round_samples] = match rounds {
            1 => [n as u64, C::samples_below(n) as u64],
            _ => {
                let all: usize = kinds.iter().map(Vec::len).sum();
                let sums = comm.all_reduce_sum_vec(&[all as u64, kinds[0].len() as u64]);
                [sums[0], sums[1]]
            }
        };
        let splitters = ctx.phase("merge splitters", || {
            merge_splitters(ctx, &kinds.each_ref().map(|v| &v[..]), total as usize)
        });
        // A sample's pe from its rank against the splitters that are samples (and a comparison
        // with any others between two of them: rare), another record's from its head's lead and,
        // for the splitters that share it, a comparison.
        let (exact, leads) = (
            splitters.exact_keys(sample_rank),
            splitters.coarse_keys(|b| b.head.lead()),
        );
        let sample_dest =
            |r: &Rec<C, H, I>| splitters.round_of_exact(&exact, r.own_rank(), |b| b <= r);
        let dest = |r: &Rec<C, H, I>| splitters.round_of_coarse(&leads, r.head.lead(), |b| b <= r);
        let mut kinds = kinds.into_iter();
        let samples = kinds.next().expect("kind 0: the samples");
        let samples = ctx.phase("place samples", || {
            place_samples(ctx, samples, samples_done, sample_dest)
        });
        samples_done += round_samples;
        let groups: Vec<Vec<Rec<C, H, I>>> = ctx.phase(phases.sort_groups, || {
            let t0 = std::time::Instant::now();
            let groups = kinds.map(|g| sort_group(exchange(comm, g, dest))).collect();
            log::debug!(
                "{}: exchange and sort {:.3} s",
                phases.sort_groups,
                t0.elapsed().as_secs_f64()
            );
            groups
        });
        let part = ctx.phase("merge", || merge_lists(samples, groups));
        ctx.note_imbalance(part.len(), total as usize);
        if rounds == 1 {
            let first = comm.exscan_sum(part.len() as u64);
            return SortedPart {
                sa: part,
                first,
                placed: false,
            }
            .deliver_to(ctx, sink);
        }
        if sink.writes() {
            sink.write(ctx, done + comm.exscan_sum(part.len() as u64), &part);
            done += total;
        } else {
            done += ctx.phase("merge to layout", || {
                rebalance_into(comm, &part, done, layout, &mut placed)
            });
        }
        drop(part);
        release_freed();
    }
    if sink.writes() {
        return None;
    }
    Some(SortedPart {
        sa: placed,
        first: layout.start(me) as u64,
        placed: true,
    })
}

impl SortedPart {
    /// Hands a level's finished part on: kept as it is (Some) when the sink holds (a recursion
    /// level, or level 0 held: the caller puts it in its layout), or written at its SA index and
    /// freed (None). Local.
    pub(super) fn deliver_to(self, ctx: &Ctx, sink: &SaSink) -> Option<SortedPart> {
        if !sink.writes() {
            return Some(self);
        }
        sink.write(ctx, self.first, &self.sa);
        None
    }

    /// Level 0's suffix array for `sink`: this pe's part of `layout` when it holds (rebalanced
    /// unless placed there already), None when the part went to the file. Collective.
    pub(super) fn into_sink(
        part: Option<SortedPart>,
        ctx: &Ctx,
        layout: &Layout,
        sink: &SaSink,
    ) -> Option<Vec<u64>> {
        part.and_then(|p| p.deliver_to(ctx, sink))
            .map(|p| p.into_layout(ctx, layout))
    }
}

/// What a level's merge records are built from: this pe's positions lo..hi, the ranks of its
/// sample positions (samples `first..end` in position order, [`Cover::sample_index`]) and of
/// those among the X − 1 positions after its slice, the heads, and with several rounds the round
/// of each position's record.
struct Source<I, F> {
    lo: usize,
    hi: usize,
    first: usize,
    end: usize,
    rank: Vec<I>,
    halo: Vec<I>,
    head: F,
    round: Vec<u8>,
}

impl<I: Index, F> Source<I, F> {
    /// The rank of sample position i (0 past the end).
    #[inline]
    fn rank_at<C: Cover>(&self, i: usize) -> u64 {
        let k = C::sample_index(i);
        if i < self.hi {
            self.rank[k - self.first].to_u64()
        } else {
            self.halo.get(k - self.end).map_or(0, |r| r.to_u64())
        }
    }

    /// The merge record of position i (lo ≤ i < hi).
    #[inline]
    fn rec<C: Cover, H: Head>(&self, i: usize) -> Rec<C, H, I>
    where
        F: Fn(usize) -> H,
    {
        let a = i % C::X;
        Rec::new(i as u64, (self.head)(i), |s| {
            self.rank_at::<C>(i + C::to_slot(a, s))
        })
    }

    /// Whether `bound` is at most the record of position i, for a bound whose head leads as
    /// i's does ([`Head::lead`]): their first l characters agree, so the ranks of i + l and
    /// bound + l decide ([`compare`]), then the positions.
    #[inline]
    fn bound_at_most<C: Cover, H: Head>(&self, bound: &Rec<C, H, I>, i: usize) -> bool {
        let (l, _, t) = C::decide(i % C::X, bound.residue());
        (bound.rank(t), bound.pos()) <= (self.rank_at::<C>(i + l), i as u64)
    }

    /// Whether `bound` is at most the record of position i, for any bound: by their heads'
    /// leads, and where they are equal as [`Self::bound_at_most`].
    #[inline]
    fn bound_below_or_at<C: Cover, H: Head>(&self, bound: &Rec<C, H, I>, i: usize) -> bool
    where
        F: Fn(usize) -> H,
    {
        let (b, x) = (bound.head.lead(), (self.head)(i).lead());
        b < x || (b == x && self.bound_at_most(bound, i))
    }

    /// The merge records of the positions of this pe that `select` takes, by kind (samples
    /// first, then each group). Local.
    fn records<C: Cover, H: Head, const KINDS: usize>(
        &self,
        select: Select,
    ) -> [Vec<Rec<C, H, I>>; KINDS]
    where
        F: Fn(usize) -> H + Sync,
    {
        build_by_kind(
            self.lo,
            self.hi,
            select,
            |i| C::kind(i % C::X),
            |i| self.rec(i),
        )
    }
}

/// Whether a merge record is a sample: the bounds prefer those ([`snap_cuts`]).
fn is_sample<C: Cover, H: Head, I: Index>(r: &Rec<C, H, I>) -> bool {
    C::kind(r.residue()) == 0
}

/// The rank of a merge record that is a sample, its exact key among the samples (their order is
/// that of their ranks): for [`RoundBounds::exact_keys`].
fn sample_rank<C: Cover, H: Head, I: Index>(r: &Rec<C, H, I>) -> Option<u64> {
    is_sample(r).then(|| r.own_rank())
}

/// Sends the sample records to the pes of their ranges and places them by rank: the ranks a pe
/// receives form one interval of 1..=samples, after the `before` samples of earlier rounds.
/// Collective.
fn place_samples<C: Cover, H: Head, I: Index>(
    ctx: &Ctx,
    samples: Vec<Rec<C, H, I>>,
    before: u64,
    dest: impl Fn(&Rec<C, H, I>) -> usize + Sync,
) -> Vec<Rec<C, H, I>> {
    let got = exchange(&ctx.comm, samples, dest);
    let first = before + ctx.comm.exscan_sum(got.len() as u64) + 1;
    let mut out = vec![Rec::zeroed(); got.len()];
    scatter(&got, &mut out, |r| ((r.own_rank() - first) as usize, *r));
    out
}

/// p − 1 splitters of the final order of all n merge records of a round, from a random sample of
/// every kind of record ([`gathered_sample`]); pe d takes the records from splitter d − 1
/// (inclusive) to splitter d. A splitter that is not a sample moves to the nearest sampled one
/// that is, within 1/[`SNAP`] of a pe's share ([`snap_cuts`]). Collective; the same on every pe.
fn merge_splitters<C: Cover, H: Head, I: Index>(
    ctx: &Ctx,
    kinds: &[&[Rec<C, H, I>]],
    n: usize,
) -> RoundBounds<Rec<C, H, I>> {
    let comm = &ctx.comm;
    let p = comm.size();
    if p == 1 || n == 0 {
        return RoundBounds::from_sorted(Vec::new());
    }
    let all = gathered_sample(comm, kinds, n, 0x3e76e);
    if all.is_empty() {
        return RoundBounds::from_sorted(Vec::new());
    }
    let mut at: Vec<usize> = (1..p).map(|j| j * all.len() / p).collect();
    let slack = all.len() / p / SNAP;
    snap_cuts(&mut at, all.len(), slack, |k| is_sample(&all[k]));
    RoundBounds::from_sorted(at.into_iter().map(|k| all[k]).collect())
}

/// The positions of the sorted samples and groups, merged (the lists are freed on return).
fn merge_lists<C: Cover, H: Head, I: Index>(
    samples: Vec<Rec<C, H, I>>,
    groups: Vec<Vec<Rec<C, H, I>>>,
) -> Vec<u64> {
    let (samples, groups) = (&samples[..], &groups[..]);
    let mut out = Vec::with_capacity(samples.len() + groups.iter().map(Vec::len).sum::<usize>());
    match groups {
        [g] => merge_two(&mut out, g, samples),
        [a, b] => merge_three(&mut out, a, b, samples),
        _ => {
            let mut lists: Vec<&[Rec<C, H, I>]> = groups.iter().map(|g| &g[..]).collect();
            lists.push(samples);
            merge_many(&mut out, &lists);
        }
    }
    out
}

/// Appends the positions of two sorted lists to `out` in merged order (the list to take from
/// chosen without a branch, [`less`]).
fn merge_two<C: Cover, H: Head, I: Index>(
    out: &mut Vec<u64>,
    a: &[Rec<C, H, I>],
    b: &[Rec<C, H, I>],
) {
    let (mut x, mut y) = (0, 0);
    while x < a.len() && y < b.len() {
        let (ra, rb) = (&a[x], &b[y]);
        let take_a = less(ra, rb);
        out.push(if take_a { ra.pos() } else { rb.pos() });
        x += usize::from(take_a);
        y += usize::from(!take_a);
    }
    out.extend(a[x..].iter().map(Rec::pos));
    out.extend(b[y..].iter().map(Rec::pos));
}

/// Appends the positions of three sorted lists to `out` in merged order: three-way while all
/// three have records (the smaller of a and b against c, chosen without a branch), then two-way.
fn merge_three<C: Cover, H: Head, I: Index>(
    out: &mut Vec<u64>,
    a: &[Rec<C, H, I>],
    b: &[Rec<C, H, I>],
    c: &[Rec<C, H, I>],
) {
    let (mut x, mut y, mut z) = (0, 0, 0);
    while x < a.len() && y < b.len() && z < c.len() {
        let (ra, rb, rc) = (&a[x], &b[y], &c[z]);
        let a_first = less(ra, rb);
        let w = if a_first { ra } else { rb };
        let w_first = less(w, rc);
        out.push(if w_first { w.pos() } else { rc.pos() });
        x += usize::from(a_first & w_first);
        y += usize::from(!a_first & w_first);
        z += usize::from(!w_first);
    }
    if x == a.len() {
        merge_two(out, &b[y..], &c[z..]);
    } else if y == b.len() {
        merge_two(out, &a[x..], &c[z..]);
    } else {
        merge_two(out, &a[x..], &b[y..]);
    }
}

/// Appends the positions of any number of sorted lists to `out` in merged order (covers with
/// more than two groups).
fn merge_many<C: Cover, H: Head, I: Index>(out: &mut Vec<u64>, lists: &[&[Rec<C, H, I>]]) {
    let mut at = vec![0usize; lists.len()];
    loop {
        let mut best: Option<usize> = None;
        for (k, list) in lists.iter().enumerate() {
            if at[k] < list.len() && best.is_none_or(|b| list[at[k]] < lists[b][at[b]]) {
                best = Some(k);
            }
        }
        let Some(k) = best else { break };
        out.push(lists[k][at[k]].pos());
        at[k] += 1;
    }
}

/// Sorts records by a 64-bit key through (key, index) integers, sorted by the key half, and a
/// gather: several times faster than moving 20–40-byte records through a radix sort by a
/// computed key. The key must order the records as their comparison does; `key_bits` bounds its
/// width (None: found by a pass over the records). Local; memory: the records twice and 8 or
/// 16 bytes per record.
pub(super) fn sort_by_key_via_index<R: Copy + Send + Sync>(
    v: Vec<R>,
    sorter: &dyn LocalSort,
    key_bits: Option<u32>,
    key: impl Fn(&R) -> u64 + Sync,
) -> Vec<R> {
    if v.is_empty() {
        return v;
    }
    let kb = key_bits.unwrap_or_else(|| bits(v.iter().map(&key).max().unwrap_or(0)));
    let ib = bits(v.len() as u64);
    if kb + ib <= 64 {
        // Key and index fit one u64: a sort of 8-byte integers.
        let mut keyed: Vec<u64> = map_maybe_par(&v, |j, r| (key(r) << ib) | j as u64);
        sorter.sort_u64(&mut keyed);
        let mask = (1u64 << ib) - 1;
        map_maybe_par(&keyed, |_, &k| v[(k & mask) as usize])
    } else {
        let mut keyed: Vec<u128> = map_maybe_par(&v, |j, r| ((key(r) as u128) << 64) | j as u128);
        sorter.sort_u128_by_high(&mut keyed);
        map_maybe_par(&keyed, |_, &k| v[k as u64 as usize])
    }
}

/// A radix sort of one pe's records by their `Radixable` key, on the pe's threads when it has
/// several.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::dcx::cover::{Dc3, Dc7};
    use crate::index::U40;

    /// [`less`] says what [`compare`] says for every pair of records of every residue, with
    /// heads that agree in none, some or all of their characters (three characters) and ranks
    /// that often tie.
    fn less_is_compare<C: Cover, H: Head, I: Index>(head: impl Fn(u64, u64) -> H) {
        let mut rng = crate::util::SplitMix::new(11);
        let records: Vec<Rec<C, H, I>> = (0..150u64)
            .map(|i| {
                let (c0, c1) = (rng.next() % 3, rng.next() % 3);
                let ranks: Vec<u64> = (0..C::S).map(|_| rng.next() % 4).collect();
                Rec::new(i, head(c0, c1), |s| ranks[s])
            })
            .collect();
        for x in &records {
            for y in &records {
                assert_eq!(less(x, y), compare(x, y) == Ordering::Less, "{x:?} {y:?}");
            }
        }
    }

    fn less_is_compare_in<I: Index>() {
        less_is_compare::<Dc3, Packed2<I>, I>(Packed2::new);
        less_is_compare::<Dc3, [I; 2], I>(|a, b| [I::from_u64(a), I::from_u64(b)]);
        less_is_compare::<Dc3, Name<I>, I>(|a, b| Name(I::from_u64(3 * a + b)));
        less_is_compare::<Dc7, Name<I>, I>(|a, b| Name(I::from_u64(3 * a + b)));
    }

    #[test]
    fn branch_free_comparison_agrees_in_every_width() {
        less_is_compare_in::<u32>();
        less_is_compare_in::<U40>();
        less_is_compare_in::<u64>();
    }
}
