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
use super::{map_maybe_par, Phases, RankWord, SortedPart};
use crate::dist::{build_by_kind, exchange, right_halo, scatter, Layout};
use crate::local::LocalSort;
use crate::Ctx;

/// The first characters of a suffix in a merge record, or a name that stands for them.
pub(super) trait Head: Pod + Send + Sync {
    /// Compares the first l characters (l < X) of two suffixes.
    fn cmp_prefix(&self, o: &Self, l: usize) -> Ordering;
}

/// A prefix name: the number of suffixes whose first h characters are smaller, for an h of at
/// least X (pCSS' names). Equal names mean equal first X characters; different names order the
/// suffixes.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub(super) struct Name<W>(pub(super) W);

impl<W: Pod + Ord + Send + Sync> Head for Name<W> {
    #[inline]
    fn cmp_prefix(&self, o: &Self, _l: usize) -> Ordering {
        self.0.cmp(&o.0)
    }
}

/// A merge record of cover `Cover`: the position i, its head, and the ranks of the sample
/// positions i + (D[s] − i) mod X for every slot s (0 past the end). Declared by
/// [`merge_record!`]; ordered by [`compare`].
pub(super) trait MergeRecord: Pod + Ord + Send + Sync {
    type Cover: Cover;
    type Head: Head;
    /// The record of position i; `rank(s)` is the rank of the sample position of slot s.
    fn new(i: u64, head: Self::Head, rank: impl Fn(usize) -> u64) -> Self;
    fn pos(&self) -> u64;
    fn head(&self) -> &Self::Head;
    /// The rank of the sample position of slot s.
    fn rank(&self, s: usize) -> u64;
    #[inline]
    fn residue(&self) -> usize {
        self.pos() as usize % Self::Cover::X
    }
    /// The rank of i itself (i a sample position).
    #[inline]
    fn own_rank(&self) -> u64 {
        self.rank(Self::Cover::slot(self.residue()))
    }
}

/// The DCX comparison of two suffixes by their records (see the module doc); the position breaks
/// ties (there are none between different suffixes: one of two equal heads ends first).
#[inline]
pub(super) fn compare<R: MergeRecord>(x: &R, y: &R) -> Ordering {
    let (l, s, t) = R::Cover::decide(x.residue(), y.residue());
    match x.head().cmp_prefix(y.head(), l) {
        Ordering::Equal => match x.rank(s).cmp(&y.rank(t)) {
            Ordering::Equal => x.pos().cmp(&y.pos()),
            unequal => unequal,
        },
        unequal => unequal,
    }
}

/// Declares a merge record: `merge_record!(Name: Cover, Head, Word)` with fields `head`,
/// `r: [Word; S]` and `i: Word`, ordered by [`compare`].
macro_rules! merge_record {
    ($(#[$doc:meta])* $name:ident: $cover:ty, $head:ty, $w:ty) => {
        $(#[$doc])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
        struct $name {
            head: $head,
            r: [$w; <$cover as $crate::algo::dcx::cover::Cover>::S],
            i: $w,
        }

        impl Ord for $name {
            #[inline]
            fn cmp(&self, o: &Self) -> std::cmp::Ordering {
                $crate::algo::dcx::merge::compare(self, o)
            }
        }

        impl PartialOrd for $name {
            fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(o))
            }
        }

        impl $crate::algo::dcx::merge::MergeRecord for $name {
            type Cover = $cover;
            type Head = $head;
            #[inline]
            fn new(i: u64, head: $head, rank: impl Fn(usize) -> u64) -> Self {
                use $crate::algo::dcx::RankWord;
                $name {
                    head,
                    r: std::array::from_fn(|s| <$w>::from_u64(rank(s))),
                    i: <$w>::from_u64(i),
                }
            }
            #[inline]
            fn pos(&self) -> u64 {
                self.i as u64
            }
            #[inline]
            fn head(&self) -> &$head {
                &self.head
            }
            #[inline]
            fn rank(&self, s: usize) -> u64 {
                self.r[s] as u64
            }
            #[inline]
            fn residue(&self) -> usize {
                // In the record's width: a 32-bit modulo is the cheaper one.
                (self.i % <$cover as $crate::algo::dcx::cover::Cover>::X as $w) as usize
            }
        }
    };
}
pub(super) use merge_record;

/// Declares a narrow record wrapper radix-sorted by a 64-bit key that orders one group of records
/// exactly as their comparison does: `radix_by_key!(Wrapper(Record), |r| key)`. Its comparisons
/// (the radix sort's fall-backs for small buckets) use the key too.
macro_rules! radix_by_key {
    ($(#[$doc:meta])* $name:ident($rec:ty), |$r:ident| $key:expr) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
        struct $name($rec);

        impl PartialOrd for $name {
            #[inline]
            fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
                use voracious_radix_sort::Radixable;
                Some(self.key().cmp(&o.key()))
            }
        }

        impl voracious_radix_sort::Radixable<u64> for $name {
            type Key = u64;
            #[inline]
            fn key(&self) -> u64 {
                let $r = &self.0;
                $key
            }
        }
    };
}
pub(super) use radix_by_key;

/// Sorts all suffixes of a level with the sample ranks; returns its suffix array, sorted across
/// pes but not rebalanced. Collective.
///
/// Entry: `rank` holds the rank of every sample position of this pe's slice (0 elsewhere);
/// `head(i)` gives the head of position i of this pe (dropped once the records are built);
/// `sort_group` sorts one pe's records of a group of non-sample residues (the instance's local
/// sort). Exit: this pe's range of the suffix array (about n/p entries) and its first index.
///
/// Cost: one all-to-all per kind of record, n records in all; the samples are placed by rank
/// (no sort) and each group sorted locally. Memory: the records (20–40 B per position) and, during
/// one kind's exchange, a second copy of that kind.
#[must_use]
pub(super) fn merge<R: MergeRecord, K: RankWord, const KINDS: usize>(
    ctx: &Ctx,
    layout: &Layout,
    rank: Vec<K>,
    head: impl Fn(usize) -> R::Head + Sync,
    phases: &Phases,
    sort_group: impl Fn(Vec<R>) -> Vec<R>,
) -> SortedPart {
    const { assert!(KINDS == <R::Cover as Cover>::KINDS) };
    let comm = &ctx.comm;
    let n = layout.len();
    let kinds: [Vec<R>; KINDS] = ctx.phase("merge records", || records(ctx, layout, &rank, &head));
    drop((rank, head));
    let splitters = ctx.phase("merge splitters", || {
        merge_splitters(ctx, &kinds.each_ref().map(|v| &v[..]), n)
    });
    let dest = |r: &R| splitters.partition_point(|s| s < r);
    let mut kinds = kinds.into_iter();
    let samples = kinds.next().expect("kind 0: the samples");
    let samples = ctx.phase("place samples", || place_samples(ctx, samples, dest));
    let groups: Vec<Vec<R>> = ctx.phase(phases.sort_groups, || {
        let t0 = std::time::Instant::now();
        let groups = kinds.map(|g| sort_group(exchange(comm, g, dest))).collect();
        log::debug!(
            "{}: exchange and sort {:.3} s",
            phases.sort_groups,
            t0.elapsed().as_secs_f64()
        );
        groups
    });
    let sa = ctx.phase("merge", || merge_lists(&samples, &groups));
    ctx.note_imbalance(sa.len(), n);
    let first = comm.exscan_sum(sa.len() as u64);
    SortedPart { sa, first }
}

/// The merge records of this pe's positions, by kind (samples first, then each group). Collective
/// (a halo of X − 1 ranks).
fn records<R: MergeRecord, K: RankWord, const KINDS: usize>(
    ctx: &Ctx,
    layout: &Layout,
    rank: &[K],
    head: &(impl Fn(usize) -> R::Head + Sync),
) -> [Vec<R>; KINDS] {
    let x = R::Cover::X;
    let me = ctx.comm.rank();
    let (lo, hi) = (layout.start(me), layout.end(me));
    let halo = right_halo(&ctx.comm, rank, x - 1);
    let rank_at = |i: usize| -> u64 {
        if i < hi {
            rank[i - lo].get()
        } else {
            halo.get(i - hi).map_or(0, |r| r.get())
        }
    };
    build_by_kind(
        lo,
        hi,
        |i| R::Cover::kind(i % x),
        |i| {
            let a = i % x;
            R::new(i as u64, head(i), |s| rank_at(i + R::Cover::to_slot(a, s)))
        },
    )
}

/// Sends the sample records to the pes of their ranges and places them by rank: the ranks a pe
/// receives form one interval of 1..=samples. Collective.
fn place_samples<R: MergeRecord>(
    ctx: &Ctx,
    samples: Vec<R>,
    dest: impl Fn(&R) -> usize + Sync,
) -> Vec<R> {
    let got = exchange(&ctx.comm, samples, dest);
    let first = ctx.comm.exscan_sum(got.len() as u64) + 1;
    let mut out = vec![R::zeroed(); got.len()];
    scatter(&got, &mut out, |r| ((r.own_rank() - first) as usize, *r));
    out
}

/// p − 1 splitters of the final order of all n merge records, from a random sample of every
/// kind of record (each pe draws from each in proportion to its share).
/// Collective; the same on every pe.
fn merge_splitters<R: Pod + Ord + Send + Sync>(ctx: &Ctx, kinds: &[&[R]], n: usize) -> Vec<R> {
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

/// The positions of the sorted samples and groups, merged.
fn merge_lists<R: MergeRecord>(samples: &[R], groups: &[Vec<R>]) -> Vec<u64> {
    let mut out = Vec::with_capacity(samples.len() + groups.iter().map(Vec::len).sum::<usize>());
    match groups {
        [g] => merge_two(&mut out, g, samples),
        [a, b] => merge_three(&mut out, a, b, samples),
        _ => {
            let mut lists: Vec<&[R]> = groups.iter().map(|g| &g[..]).collect();
            lists.push(samples);
            merge_many(&mut out, &lists);
        }
    }
    out
}

/// Appends the positions of two sorted lists to `out` in merged order.
fn merge_two<R: MergeRecord>(out: &mut Vec<u64>, a: &[R], b: &[R]) {
    let (mut x, mut y) = (0, 0);
    while x < a.len() && y < b.len() {
        if a[x] < b[y] {
            out.push(a[x].pos());
            x += 1;
        } else {
            out.push(b[y].pos());
            y += 1;
        }
    }
    out.extend(a[x..].iter().map(R::pos));
    out.extend(b[y..].iter().map(R::pos));
}

/// Appends the positions of three sorted lists to `out` in merged order: three-way while all
/// three have records, then two-way.
fn merge_three<R: MergeRecord>(out: &mut Vec<u64>, a: &[R], b: &[R], c: &[R]) {
    let (mut x, mut y, mut z) = (0, 0, 0);
    while x < a.len() && y < b.len() && z < c.len() {
        let (ra, rb, rc) = (&a[x], &b[y], &c[z]);
        if ra < rb {
            if ra < rc {
                out.push(ra.pos());
                x += 1;
            } else {
                out.push(rc.pos());
                z += 1;
            }
        } else if rb < rc {
            out.push(rb.pos());
            y += 1;
        } else {
            out.push(rc.pos());
            z += 1;
        }
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
fn merge_many<R: MergeRecord>(out: &mut Vec<u64>, lists: &[&[R]]) {
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
    let kb = key_bits.unwrap_or_else(|| 64 - v.iter().map(&key).max().unwrap_or(0).leading_zeros());
    let ib = 64 - (v.len() as u64).leading_zeros();
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
