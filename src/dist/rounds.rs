//! Sample sort in rounds: the records of one key range at a time are generated, sorted across
//! the pes and handed to a consumer, then freed (Distributed DCX's bucketed sort), so a pe never
//! holds more than its share of one range.

use super::sample_sort::{sample_sort, SortEnv, SplitMix};
use super::{last_of_left, right_halo, SortKey};

/// Samples drawn over all pes per round to place the round boundaries: the relative error of a
/// round's size is about 1/sqrt of it (≈ 4 %).
const SAMPLES_PER_ROUND: usize = 512;

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

/// Sorts a distributed sequence of records in `rounds` key ranges, one after the other.
/// Collective.
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
/// Each round's sort is timed as the phase `sort_phase`. With `rounds` = 1 this is
/// [`sample_sort`] of `generate` for the one unbounded range (no sample is drawn here). Otherwise round boundaries are chosen first from a sample of about
/// [`SAMPLES_PER_ROUND`] records per round over all pes (every pe draws in proportion to `len`),
/// so rounds hold about n / `rounds` records each.
///
/// Cost: `rounds` calls of `generate`, one [`sample_sort`] per round (its exchange and local
/// sort), one all-gather of the sample, and a few one-record collectives per round. Memory: the
/// round's records (two copies during its exchange) and what the consumer keeps, instead of all
/// records.
pub fn sort_in_rounds<T, R, G, C>(
    ctx: &impl SortEnv,
    sort_phase: &str,
    rounds: usize,
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
    let rounds = rounds.max(1);
    let bounds = RoundBounds::choose(ctx, rounds, len, record);
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

impl<T: Copy + bytemuck::Pod + Ord> RoundBounds<T> {
    /// Chooses the boundaries of `rounds` ranges from a sample of about [`SAMPLES_PER_ROUND`]
    /// records per round over all pes: this pe holds `len` records, `record(j)` its j-th, and
    /// draws in proportion to `len`; the boundaries are sampled records, so ranges hold about
    /// n / `rounds` records each. With one round nothing is drawn. Collective (the phase
    /// "· round splitters": one reduction and one all-gather of the sample).
    pub fn choose(
        ctx: &impl SortEnv,
        rounds: usize,
        len: usize,
        record: impl Fn(usize) -> T,
    ) -> Self {
        let comm = ctx.comm();
        if rounds <= 1 {
            return RoundBounds { bounds: Vec::new() };
        }
        let bounds = ctx.phase("· round splitters", || {
            let n = comm.all_reduce_sum(len as u64);
            let want = (len as u128 * (SAMPLES_PER_ROUND * rounds) as u128)
                .div_ceil(n.max(1) as u128) as usize;
            let mut rng = SplitMix::new(0x7f4a_7c15 ^ ((comm.rank() as u64) << 32) ^ n);
            let sample: Vec<T> = if len == 0 {
                Vec::new()
            } else {
                (0..want.min(len))
                    .map(|_| record((rng.next() % len as u64) as usize))
                    .collect()
            };
            let mut all = comm.all_gather_v(&sample);
            all.sort_unstable();
            if all.is_empty() {
                Vec::new()
            } else {
                (1..rounds).map(|r| all[r * all.len() / rounds]).collect()
            }
        });
        RoundBounds { bounds }
    }

    /// The bounds (lower inclusive, upper exclusive; None: unbounded) of round `index`.
    pub fn range(&self, index: usize) -> (Option<T>, Option<T>) {
        let lo = index
            .checked_sub(1)
            .and_then(|r| self.bounds.get(r).copied());
        (lo, self.bounds.get(index).copied())
    }

    /// The round whose range holds `x` (a binary search of the bounds).
    #[inline]
    pub fn round_of(&self, x: &T) -> usize {
        self.bounds.partition_point(|b| b <= x)
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
