//! Sample sort in rounds: the records of one key range at a time are generated, sorted across
//! the pes and handed to a consumer, then freed (Distributed DCX's bucketed sort), so a pe never
//! holds more than its share of one range.

use super::sample_sort::{count_below, sample_sort, SortEnv};
use super::{last_of_left, right_halo, SortKey};
use crate::util::SplitMix;

/// Samples drawn over all pes per round to place the round boundaries: the relative error of a
/// round's size is about 1/sqrt of it (≈ 4 %).
const SAMPLES_PER_ROUND: usize = 512;

/// How a distributed sequence is cut into key ranges ([`RoundBounds::choose`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ranges {
    /// The ranges asked for, each of about `of` / `count` records (1: one range, nothing
    /// sampled); fewer where the records are fewer than `of` or too alike to cut (a range never
    /// splits equal ones), more where they cluster by pe (`per_pe`).
    pub count: usize,
    /// At most about this many records of one pe in a range; None: [`SPREAD`] × the mean pe's
    /// share of a range (`of` / p / `count`).
    pub per_pe: Option<u64>,
    /// The size the ranges are measured against; None: the sequence's own length. A sequence
    /// that holds a fraction of it (the suffixes still unresolved after a round) then takes that
    /// fraction of `count` ranges, each as large as they would be for all of it.
    pub of: Option<u64>,
}

impl Ranges {
    /// `count` ranges, each pe's part of one near its mean share.
    pub fn new(count: usize) -> Self {
        Ranges {
            count: count.max(1),
            per_pe: None,
            of: None,
        }
    }

    /// Ranges of about `whole` / `count` records each, as many as the sequence needs (at most
    /// `count` while it holds at most `whole` records and they do not cluster by pe).
    pub fn sized(count: usize, whole: u64) -> Self {
        Ranges {
            of: Some(whole),
            ..Ranges::new(count)
        }
    }
}

/// One round of [`sort_in_rounds`], as the consumer sees it on one pe.
pub struct Round<T> {
    /// Which round (0-based).
    pub index: usize,
    /// How many rounds there are.
    pub rounds: usize,
    /// This pe's part of the round, sorted; the parts are in pe order and the rounds in key order,
    /// so the concatenation over rounds and pes is the whole sequence sorted.
    pub sorted: Vec<T>,
    /// The global rank of `sorted[0]` in the whole sorted sequence (the records of earlier rounds
    /// plus those of lower pes in this round).
    pub offset: u64,
    /// The number of records in earlier rounds (the global rank of the round's first record).
    pub before: u64,
    /// The record just before `sorted[0]` in the whole sequence (on a lower pe or in an earlier
    /// round), if any; when `sorted` is empty, the last record before this pe's place.
    pub prev: Option<T>,
    /// The record just after this pe's last one within this round; when `sorted` is empty, the
    /// first record after this pe's place. None when no record of this round follows.
    pub next: Option<T>,
}

impl<T> Round<T> {
    /// Whether no round follows (so no record follows the round's last one).
    pub fn is_last(&self) -> bool {
        self.index + 1 == self.rounds
    }

    /// Whether this pe holds the round's first record.
    pub fn holds_first(&self) -> bool {
        self.offset == self.before && !self.sorted.is_empty()
    }

    /// Whether this pe holds the round's last record while later rounds follow (its successor
    /// is the first record of the next non-empty round).
    pub fn open_end(&self) -> bool {
        !self.is_last() && self.next.is_none() && !self.sorted.is_empty()
    }
}

/// Sorts a distributed sequence of records in key ranges, one after the other: about
/// `ranges.count`, more where records cluster by pe (see [`RoundBounds::choose`]). Collective.
///
/// Entry: this pe generates `len` records (unique over all pes, as for [`sample_sort`]):
/// `record(j)` is its j-th (j < `len`), and `generate(bounds, k)` returns all of its records x of
/// round k, those with lo ≤ x < hi for `(lo, hi) = bounds.range(k)` (None: unbounded), in any
/// order ([`RoundBounds::round_of`] tells any record's round, so a caller may find every record's
/// round once, in round 0, and then generate each round's records alone). `generate` is called
/// once per round on every pe, in round order, so it may be collective. `record` only draws the sample the boundaries are
/// chosen from, and the boundaries are values it returned: a caller that wants boundaries only
/// between some coarser classes of records (say, groups) may return the smallest value of the
/// j-th record's class instead. Exit: `consume` has been
/// called once per round on every pe, in round order, with this pe's part of the round
/// ([`Round`]); within a round the parts are balanced (about 1/p of the round each, whatever the
/// keys: records are unique, so equal characters never pile up on one pe).
///
/// Each round's sort is timed as the phase `sort_phase`. With one range this is
/// [`sample_sort`] of `generate` for the one unbounded range (no sample is drawn here).
/// Otherwise round boundaries are chosen first from a sample of about [`SAMPLES_PER_ROUND`]
/// records per round over all pes (every pe draws in proportion to `len`), so rounds hold at
/// most about n / `count` records each, and each pe's part of one at most about `per_pe`.
///
/// Cost: per range, one call of `generate`, one [`sample_sort`] (its exchange and local sort)
/// and a few one-record collectives; once, the gathers of the sample. Memory: the
/// round's records (two copies during its exchange) and what the consumer keeps, instead of all
/// records.
pub fn sort_in_rounds<T, R, G, C>(
    ctx: &impl SortEnv,
    sort_phase: &str,
    ranges: Ranges,
    len: usize,
    record: R,
    generate: G,
    mut consume: C,
) where
    T: SortKey,
    R: Fn(usize) -> T,
    G: Fn(&RoundBounds<T>, usize) -> Vec<T>,
    C: FnMut(Round<T>),
{
    let comm = ctx.comm();
    let bounds = RoundBounds::choose(ctx, ranges, len, record, |_| true);
    let rounds = bounds.rounds();
    let mut done = 0u64; // records in earlier rounds
    let mut last: Option<T> = None; // the last record of earlier rounds
    for index in 0..rounds {
        let before = done;
        let mine = generate(&bounds, index);
        let sorted = ctx.phase(sort_phase, || sample_sort(ctx, mine));
        let offset = done + comm.exscan_sum(sorted.len() as u64);
        let total = comm.all_reduce_sum(sorted.len() as u64);
        let prev = last_of_left(comm, &sorted).or(last);
        let next = right_halo(comm, &sorted, 1).first().copied();
        // The round's last record, for the rounds after it (unchanged by an empty round).
        last = last_of_all(comm, &sorted).or(last);
        done += total;
        consume(Round {
            index,
            rounds,
            sorted,
            offset,
            before,
            prev,
            next,
        });
        if rounds > 1 {
            release_freed();
        }
    }
}

/// The boundaries of `rounds` key ranges of a distributed sequence of records, the same on every
/// pe: round k holds the records x with `range(k).0 ≤ x < range(k).1` (None: unbounded). The
/// shared first step of every computation in key ranges ([`sort_in_rounds`], the difference
/// covers' merge).
pub struct RoundBounds<T> {
    bounds: Vec<T>,
}

/// The bounds of a [`RoundBounds`] that have an exact key ([`RoundBounds::exact_keys`]): their
/// places among all bounds, ascending, and their keys; whether that is every bound.
pub struct ExactBounds<K> {
    at: Vec<usize>,
    keys: Vec<K>,
    every: bool,
}

impl<T: Copy + bytemuck::Pod + Ord> RoundBounds<T> {
    /// Chooses the boundaries of about `ranges.count` ranges from a sample of about
    /// [`SAMPLES_PER_ROUND`] records per range over all pes: this pe holds `len` records,
    /// `record(j)` its j-th, and draws in proportion to `len`; the boundaries are sampled
    /// records. A range ends where it holds n / `count` of the sample, or where one pe's part
    /// of it reaches `ranges.per_pe` records — records that cluster by pe (keys in text order:
    /// aⁿ, long runs) then take more ranges, up to [`MAX_RANGES`], so that no pe holds much more
    /// than its share of one. A boundary whose record is not `preferred` moves to the nearest
    /// sampled one that is, within 1/[`SNAP`] of a range ([`snap_cuts`]; where none is, it
    /// stays). With one range nothing is drawn. Collective (the phase "· round splitters": one
    /// reduction and two all-gathers).
    pub fn choose(
        ctx: &impl SortEnv,
        ranges: Ranges,
        len: usize,
        record: impl Fn(usize) -> T,
        preferred: impl Fn(&T) -> bool,
    ) -> Self {
        let comm = ctx.comm();
        let rounds = ranges.count;
        if rounds <= 1 {
            return RoundBounds { bounds: Vec::new() };
        }
        let bounds = ctx.phase("· round splitters", || {
            let n = comm.all_reduce_sum(len as u64);
            // A range's records, and one pe's part of them.
            let per_range = ranges.of.unwrap_or(n).max(1) as f64 / rounds as f64;
            let per_pe = match ranges.per_pe {
                Some(c) => c as f64,
                None => SPREAD * per_range / comm.size() as f64,
            };
            let expected = (n as f64 / per_range).ceil().clamp(1.0, rounds as f64) as usize;
            let want = (len as u128 * (SAMPLES_PER_ROUND * expected) as u128)
                .div_ceil(n.max(1) as u128) as usize;
            let mut rng = SplitMix::new(0x7f4a_7c15 ^ ((comm.rank() as u64) << 32) ^ n);
            let sample: Vec<T> = if len == 0 {
                Vec::new()
            } else {
                (0..want.min(len))
                    .map(|_| record((rng.next() % len as u64) as usize))
                    .collect()
            };
            let counts = comm.all_gather(sample.len() as u64);
            let all = comm.all_gather_v(&sample);
            // Each sampled record with the pe it came from (the gather is in pe order).
            let mut tagged: Vec<(T, u32)> = Vec::with_capacity(all.len());
            let mut from = counts
                .iter()
                .enumerate()
                .flat_map(|(pe, &c)| std::iter::repeat_n(pe as u32, c as usize));
            tagged.extend(all.into_iter().zip(&mut from));
            tagged.sort_unstable_by_key(|t| t.0);
            // One sampled record stands for n / |sample| records.
            let weight = n as f64 / tagged.len().max(1) as f64;
            cut(
                &tagged,
                comm.size(),
                per_range / weight,
                per_pe / weight,
                preferred,
            )
        });
        RoundBounds { bounds }
    }

    /// Ranges with the given boundaries (sorted; a repeated one leaves an empty range): p − 1
    /// splitters, say, chosen by the caller. Local.
    pub fn from_sorted(bounds: Vec<T>) -> Self {
        debug_assert!(bounds.windows(2).all(|w| w[0] <= w[1]));
        RoundBounds { bounds }
    }

    /// How many ranges there are.
    pub fn rounds(&self) -> usize {
        self.bounds.len() + 1
    }

    /// The bounds (lower inclusive, upper exclusive; None: unbounded) of round `index`.
    pub fn range(&self, index: usize) -> (Option<T>, Option<T>) {
        let lo = index
            .checked_sub(1)
            .and_then(|r| self.bounds.get(r).copied());
        (lo, self.bounds.get(index).copied())
    }

    /// The round whose range holds `x`: the bounds at most `x`, counted ([`count_below`]).
    #[inline]
    pub fn round_of(&self, x: &T) -> usize {
        count_below(&self.bounds, |b| b <= x)
    }

    /// The bounds' coarse keys, for [`Self::round_of_coarse`].
    pub fn coarse_keys<K>(&self, coarse: impl Fn(&T) -> K) -> Vec<K> {
        self.bounds.iter().map(coarse).collect()
    }

    /// The bounds that `key` gives an exact key (a merge record's rank where it is a sample), for
    /// [`Self::round_of_exact`].
    pub fn exact_keys<K>(&self, key: impl Fn(&T) -> Option<K>) -> ExactBounds<K> {
        let (mut at, mut keys) = (Vec::new(), Vec::new());
        for (j, b) in self.bounds.iter().enumerate() {
            if let Some(k) = key(b) {
                at.push(j);
                keys.push(k);
            }
        }
        let every = at.len() == self.bounds.len();
        ExactBounds { at, keys, every }
    }

    /// [`Self::round_of`] of a record with an exact key: one that orders it as the records do
    /// against every bound that has one, equal only for an equal record (a sample's rank against
    /// the bounds that are samples). Those bounds are counted by key, without a branch; only the
    /// others between the last of them at most the record and the next one are looked at
    /// (`at_most(bound)`: whether that bound is at most the record), usually none (bounds that
    /// prefer exact keys, [`snap_cuts`]: then none is looked at for any record).
    #[inline]
    pub fn round_of_exact<K: Ord + Copy>(
        &self,
        exact: &ExactBounds<K>,
        key: K,
        at_most: impl Fn(&T) -> bool,
    ) -> usize {
        let k = count_below(&exact.keys, |&b| b <= key);
        if exact.every {
            return k;
        }
        let lo = k.checked_sub(1).map_or(0, |e| exact.at[e] + 1);
        let hi = exact.at.get(k).copied().unwrap_or(self.bounds.len());
        lo + self.bounds[lo..hi].partition_point(at_most)
    }

    /// [`Self::round_of`] of a record known first by a coarse key that orders as the records do
    /// where it differs (coarse(a) < coarse(b) implies a < b): the record is looked at
    /// (`at_most(bound)`: whether that bound is at most the record) only for the bounds that
    /// share its key. `keys`: [`Self::coarse_keys`] with the same function.
    #[inline]
    pub fn round_of_coarse<K: Ord + Copy>(
        &self,
        keys: &[K],
        key: K,
        at_most: impl Fn(&T) -> bool,
    ) -> usize {
        let below = count_below(keys, |&k| k < key);
        if keys.get(below) != Some(&key) {
            return below;
        }
        let equal = keys[below..].partition_point(|&k| k <= key);
        below + self.bounds[below..below + equal].partition_point(at_most)
    }
}

/// How far above its mean share of a range one pe's part may grow before the range ends (the
/// default of [`RoundBounds::choose`]): the sample's noise (a pe's share of a range is drawn from
/// about 512 / p sampled records) stays below it.
pub const SPREAD: f64 = 1.5;

/// The most ranges [`RoundBounds::choose`] makes (a record's range fits a byte).
pub const MAX_RANGES: usize = 256;

/// Position i as it is stored in the low `bits` bits of a sort key: `i · SCRAMBLE mod 2^bits`, a
/// bijection of the `bits`-bit values that [`unscramble`] undoes. Keys ordered by it order the
/// members of a group of equal keys pseudo-randomly, so a range that cuts a large group (aⁿ, a
/// repeated block) takes a part of every pe's members instead of the positions of one or two
/// pes, and each pe's share of a range shrinks with the number of ranges (Haag et al.'s
/// randomized redistribution, without moving the data). Local.
#[inline]
pub fn scramble(i: u64, bits: u32) -> u64 {
    i.wrapping_mul(SCRAMBLE) & low_mask(bits)
}

/// The position whose [`scramble`]d form is x. Local.
#[inline]
pub fn unscramble(x: u64, bits: u32) -> u64 {
    (x & low_mask(bits)).wrapping_mul(UNSCRAMBLE) & low_mask(bits)
}

#[inline]
fn low_mask(bits: u32) -> u64 {
    u64::MAX >> (64 - bits.clamp(1, 64))
}

/// An odd multiplier (the 64-bit golden ratio), invertible modulo every power of two.
const SCRAMBLE: u64 = 0x9e37_79b9_7f4a_7c15;
/// SCRAMBLE's inverse modulo 2^64 (so also modulo 2^b, b < 64), by Newton's iteration: each
/// step doubles the number of correct low bits, from 3 (x · x ≡ 1 mod 8 for odd x) to 96.
const UNSCRAMBLE: u64 = {
    let mut inv = SCRAMBLE;
    let mut step = 0;
    while step < 5 {
        inv = inv.wrapping_mul(2u64.wrapping_sub(SCRAMBLE.wrapping_mul(inv)));
        step += 1;
    }
    inv
};
const _: () = assert!(SCRAMBLE.wrapping_mul(UNSCRAMBLE) == 1);

/// The boundaries of the ranges over a sorted sample, each record tagged with its pe: a range
/// ends before the record at which it would hold more than `target` sampled records, or more
/// than `cap` of one pe (never between equal records). When that makes more than [`MAX_RANGES`],
/// both limits grow until it does not. Then a boundary whose record is not `preferred` moves to
/// the nearest one that is within `target` / [`SNAP`] records ([`snap_cuts`]). Local.
fn cut<T: Copy + Ord>(
    sample: &[(T, u32)],
    pes: usize,
    target: f64,
    cap: f64,
    preferred: impl Fn(&T) -> bool,
) -> Vec<T> {
    let mut target = target.max(1.0);
    let mut cap = cap.max(1.0);
    loop {
        let mut at: Vec<usize> = Vec::new();
        let (mut total, mut mine) = (0.0, vec![0.0; pes]);
        for (j, &(x, pe)) in sample.iter().enumerate() {
            let full = total >= target || mine[pe as usize] >= cap;
            if full && j > 0 && sample[j - 1].0 < x {
                at.push(j);
                total = 0.0;
                mine.fill(0.0);
            }
            total += 1.0;
            mine[pe as usize] += 1.0;
        }
        if at.len() < MAX_RANGES {
            let good = |k: usize| sample[k - 1].0 < sample[k].0 && preferred(&sample[k].0);
            snap_cuts(&mut at, sample.len(), (target / SNAP as f64) as usize, good);
            return at.into_iter().map(|k| sample[k].0).collect();
        }
        target *= 1.5;
        cap *= 1.5;
    }
}

/// A boundary moves at most 1/`SNAP` of its range's records to reach a preferred record
/// ([`snap_cuts`]).
pub const SNAP: usize = 32;

/// Moves each cut of a sorted sequence of `len` records (ascending indices, each at least 1: the
/// first record of the range above it) to the nearest index within `slack` for which `good`
/// holds, staying strictly between the cuts beside it; a cut with none in reach stays. A range
/// grows or shrinks by at most `slack` records. (The difference covers' merge prefers sample
/// records as bounds: a sample's range then follows from its rank alone,
/// [`RoundBounds::round_of_exact`]; a bound that is not a sample stays only where its
/// neighbourhood holds none, as in the block of mod-0 suffixes of a text of period 3.) Local.
pub fn snap_cuts(at: &mut [usize], len: usize, slack: usize, good: impl Fn(usize) -> bool) {
    for c in 0..at.len() {
        let k = at[c];
        if good(k) {
            continue;
        }
        let lo = if c == 0 { 1 } else { at[c - 1] + 1 };
        let hi = at.get(c + 1).copied().unwrap_or(len);
        let near = (1..=slack)
            .flat_map(|d| [k.checked_add(d), k.checked_sub(d)])
            .flatten()
            .find(|&j| lo <= j && j < hi && good(j));
        if let Some(j) = near {
            at[c] = j;
        }
    }
}

/// Gives the heap pages that a round freed back to the system, so that the next round's peak
/// does not stack on the last one's leftovers (glibc keeps freed blocks below its mmap threshold,
/// which rises to 32 MiB as large blocks are freed). Local; a walk over the heap's free blocks.
pub fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns unused pages of the allocator's heap to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The last record of the sequence held by all pes (the last one of the highest pe that holds
/// any), on every pe. Collective.
fn last_of_all<T: bytemuck::Pod>(comm: &crate::comm::Comm, local: &[T]) -> Option<T> {
    let tail = &local[local.len().saturating_sub(1)..];
    comm.all_gather_v(tail).last().copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::sample_sort::LINEAR_BOUNDS;

    /// A range's records, and the most of one pe, for the bounds `cut` chose.
    fn parts(sample: &[(u64, u32)], pes: usize, bounds: &[u64]) -> Vec<(usize, usize)> {
        let mut out = vec![(0, vec![0; pes]); bounds.len() + 1];
        for &(x, pe) in sample {
            let r = bounds.partition_point(|b| *b <= x);
            out[r].0 += 1;
            out[r].1[pe as usize] += 1;
        }
        out.into_iter()
            .map(|(t, m)| (t, m.into_iter().max().unwrap_or(0)))
            .collect()
    }

    #[test]
    fn mixed_records_take_the_rounds_asked_for() {
        // Every pe's records spread over the whole key space.
        let (pes, rounds) = (4, 8);
        let sample: Vec<(u64, u32)> = (0..4096u64).map(|x| (x, (x % 4) as u32)).collect();
        let cap = SPREAD * 4096.0 / (pes * rounds) as f64;
        let bounds = cut(&sample, pes, 4096.0 / rounds as f64, cap, |_| true);
        assert_eq!(bounds.len() + 1, rounds);
        assert!(parts(&sample, pes, &bounds).iter().all(|&(t, _)| t == 512));
    }

    #[test]
    fn a_coarse_key_finds_the_same_round() {
        // Bounds sharing coarse keys (x / 10) with each other and with many records.
        let bounds = RoundBounds {
            bounds: vec![5u64, 12, 17, 18, 40, 95],
        };
        let keys = bounds.coarse_keys(|b| b / 10);
        for x in 0..120u64 {
            let looked = std::cell::Cell::new(false);
            let r = bounds.round_of_coarse(&keys, x / 10, |b| {
                looked.set(true);
                *b <= x
            });
            assert_eq!(r, bounds.round_of(&x), "record {x}");
            // Looked at only when a bound shares its coarse key.
            assert_eq!(looked.get(), keys.contains(&(x / 10)), "record {x}");
        }
    }

    #[test]
    fn scrambled_positions_come_back() {
        for bits in [1, 3, 20, 32, 40, 56, 63, 64] {
            let top = if bits == 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
            for i in [0, 1, 2, 3, 12345, top / 2, top - 1, top] {
                let i = i & top;
                let x = scramble(i, bits);
                assert!(x <= top, "{i} in {bits} bits became {x}");
                assert_eq!(unscramble(x, bits), i, "{i} in {bits} bits");
            }
        }
        // A bijection: the 2^10 values of 10 bits map onto themselves.
        let mut seen: Vec<u64> = (0..1 << 10).map(|i| scramble(i, 10)).collect();
        seen.sort_unstable();
        assert!(seen.iter().copied().eq(0..1 << 10));
    }

    #[test]
    fn counted_and_searched_rounds_agree() {
        // Bounds with repeats, as few as counted one by one and as many as searched.
        let mut rng = crate::util::SplitMix::new(11);
        for len in [
            0,
            1,
            2,
            LINEAR_BOUNDS - 1,
            LINEAR_BOUNDS,
            LINEAR_BOUNDS + 1,
            40,
            255,
        ] {
            let mut b: Vec<u64> = (0..len).map(|_| rng.next() % 64).collect();
            b.sort_unstable();
            let bounds = RoundBounds::from_sorted(b.clone());
            let keys = bounds.coarse_keys(|b| b / 8);
            // Exact keys for the even records (the record doubled: orders as the records do,
            // equal only for equal), none for the odd ones.
            let exact = bounds.exact_keys(|&b| (b % 2 == 0).then_some(2 * b));
            // Every bound with an exact key: no bound is looked at.
            let every = bounds.exact_keys(|&b| Some(2 * b));
            for x in 0..70u64 {
                let want = b.partition_point(|&v| v <= x);
                assert_eq!(bounds.round_of(&x), want, "{len} bounds, record {x}");
                let got = bounds.round_of_exact(&every, 2 * x, |_| panic!("a bound looked at"));
                assert_eq!(got, want, "{len} bounds, record {x}, every key exact");
                if x % 2 == 0 {
                    let got = bounds.round_of_exact(&exact, 2 * x, |v| *v <= x);
                    assert_eq!(got, want, "{len}, {x}");
                }
                assert_eq!(count_below(&b, |&v| v < x), b.partition_point(|&v| v < x));
                assert_eq!(
                    bounds.round_of_coarse(&keys, x / 8, |b| *b <= x),
                    want,
                    "{len}, {x}"
                );
            }
        }
    }

    #[test]
    fn a_part_of_the_whole_takes_a_part_of_the_ranges() {
        // A fifth of a sequence measured against all of it: ranges of the whole's size, so
        // about a fifth of them (here 2 of 8).
        let (pes, rounds, whole) = (4, 8, 20_480.0);
        let sample: Vec<(u64, u32)> = (0..4096u64).map(|x| (x, (x % 4) as u32)).collect();
        let per_range = whole / rounds as f64;
        let bounds = cut(
            &sample,
            pes,
            per_range,
            SPREAD * per_range / pes as f64,
            |_| true,
        );
        assert_eq!(bounds.len() + 1, 2);
        assert!(parts(&sample, pes, &bounds)
            .iter()
            .all(|&(t, _)| t as f64 <= per_range));
    }

    #[test]
    fn clustered_records_take_more_ranges_each_within_the_cap() {
        // Keys in pe order (a text of one character): pe q holds keys q·1024 ….
        let (pes, rounds) = (4, 8);
        let sample: Vec<(u64, u32)> = (0..4096u64).map(|x| (x, (x / 1024) as u32)).collect();
        let cap = 4096.0 / (pes * rounds) as f64;
        let bounds = cut(&sample, pes, 4096.0 / rounds as f64, cap, |_| true);
        // A range may hold the end of one pe's keys and the start of the next one's.
        assert!((pes * rounds - pes..=pes * rounds).contains(&(bounds.len() + 1)));
        assert!(parts(&sample, pes, &bounds)
            .iter()
            .all(|&(_, most)| most <= 128));
    }

    #[test]
    fn bounds_move_to_preferred_records_within_the_slack() {
        // Preferred: records not divisible by 3 (as DC3's samples among its records), except in
        // a block of 1400 records where none is (the mod-0 suffixes of a text of period 3).
        let (pes, rounds) = (4, 8);
        let sample: Vec<(u64, u32)> = (0..4096u64).map(|x| (x, (x % 4) as u32)).collect();
        let preferred = |x: &u64| !x.is_multiple_of(3) && !(1000..2400).contains(x);
        let (target, cap) = (4096.0 / rounds as f64, 4096.0);
        let plain = cut(&sample, pes, target, cap, |_| true);
        let snapped = cut(&sample, pes, target, cap, preferred);
        let slack = (target / SNAP as f64) as u64;
        assert_eq!(plain.len(), snapped.len());
        for (&a, &b) in plain.iter().zip(&snapped) {
            if (1000 + slack..2400 - slack).contains(&a) {
                assert_eq!(a, b, "a bound inside the block stays");
            } else {
                assert!(preferred(&b) && a.abs_diff(b) <= slack, "{a} moved to {b}");
            }
        }
        // Every range keeps its size within the slack at each end.
        for (t, _) in parts(&sample, pes, &snapped) {
            assert!(t.abs_diff(512) as u64 <= 2 * slack, "a range of {t}");
        }
        // A cut moves strictly between the cuts beside it, as they are by then: the first takes
        // the one good index, the second finds none left in reach and stays.
        let mut at = vec![4, 6];
        snap_cuts(&mut at, 12, 3, |k| k == 5);
        assert_eq!(at, [5, 6]);
        let mut at = vec![4, 6];
        snap_cuts(&mut at, 12, 0, |k| k == 5);
        assert_eq!(at, [4, 6], "no slack, no move");
    }

    #[test]
    fn equal_records_stay_in_one_range_and_ranges_stay_few() {
        // Classes of 100 equal records: a bound never falls inside one.
        let sample: Vec<(u64, u32)> = (0..5000u64).map(|x| (x / 100, (x % 3) as u32)).collect();
        let bounds = cut(&sample, 3, 5000.0 / 16.0, 10.0, |_| true);
        assert!(bounds.windows(2).all(|b| b[0] < b[1]));
        assert!(parts(&sample, 3, &bounds)
            .iter()
            .all(|&(t, _)| t % 100 == 0));
        // A cap of one record a pe would make a range of each record: at most MAX_RANGES.
        let many: Vec<(u64, u32)> = (0..100_000u64).map(|x| (x, 0)).collect();
        let bounds = cut(&many, 1, 50_000.0, 1.0, |_| true);
        assert!(bounds.len() < MAX_RANGES && bounds.len() > MAX_RANGES / 2);
    }
}
