//! Lexicographic naming by flagging key changes and a global prefix sum (Kulla–Sanders §2), and
//! naming by rank: a group of equal records named by where it starts in the whole sorted
//! sequence, across the pes and the rounds of a sort in key ranges ([`GroupNames`]).

use rayon::prelude::*;

use super::{collect_range, last_of_left, Round};
use crate::comm::Comm;
use crate::index::Index;
use bytemuck::Pod;

/// Names the records of a globally sorted sequence. Collective.
///
/// Entry: `sorted` is this pe's run of a sequence sorted across pes (as `sample_sort`
/// leaves it); `same(a, b)` tells whether two neighbouring records carry equal keys.
/// Exit: `names[j]` for each local record: 1 + the number of distinct keys smaller than its key,
/// i.e. names start at 1 and equal keys get equal names. Also returns the number of distinct keys
/// in the whole sequence. Communication: one record from the left, one prefix sum.
pub fn name_sorted<T: Pod, F>(comm: &Comm, sorted: &[T], same: F) -> (Vec<u64>, u64)
where
    F: Fn(&T, &T) -> bool,
{
    let prev = last_of_left(comm, sorted);
    name_after(comm, sorted, prev.as_ref(), 0, same)
}

/// Names one round of a sequence sorted in key ranges ([`super::sort_in_rounds`]), continuing
/// the names of the rounds before: `before` is the number of distinct keys in them (the sum of
/// this function's second result over the earlier rounds). Collective.
///
/// Entry: `round` as `sort_in_rounds` hands it to every pe. Exit: `names[j]` for each of this
/// pe's records of the round: 1 + the number of distinct keys smaller than its key in the whole
/// sequence; a key whose records straddle a round boundary keeps one name (the round's first
/// record is compared with [`Round::prev`], the last record of the earlier rounds). Also returns
/// the number of keys that first appear in this round. Communication: one prefix sum and one sum.
pub fn name_round<T: Pod, F>(comm: &Comm, round: &Round<T>, before: u64, same: F) -> (Vec<u64>, u64)
where
    F: Fn(&T, &T) -> bool,
{
    name_after(comm, &round.sorted, round.prev.as_ref(), before, same)
}

/// The names of `sorted` (this pe's run of a sequence sorted across pes) whose predecessor in
/// the whole sequence is `prev`, after `before` distinct keys. Collective.
fn name_after<T: Pod, F>(
    comm: &Comm,
    sorted: &[T],
    prev: Option<&T>,
    before: u64,
    same: F,
) -> (Vec<u64>, u64)
where
    F: Fn(&T, &T) -> bool,
{
    let mut names = Vec::with_capacity(sorted.len());
    let mut acc = 0u64;
    for (j, x) in sorted.iter().enumerate() {
        let left = if j == 0 { prev } else { Some(&sorted[j - 1]) };
        if left.is_none_or(|b| !same(b, x)) {
            acc += 1;
        }
        names.push(acc);
    }
    let offset = before + comm.exscan_sum(acc);
    for n in &mut names {
        *n += offset;
    }
    let distinct = comm.all_reduce_sum(acc);
    (names, distinct)
}

/// One round's records named by rank ([`rank_round`]).
pub struct RankedRound {
    /// Per record: 1 + the number of records of the whole sequence with smaller keys (the global
    /// rank of the key's first record, 1-based).
    pub names: Vec<u64>,
    /// Per record: whether no other record holds its key. The round's last record is counted
    /// as shared when a later round follows (its first record is not known here): unique keys
    /// may be reported shared, never the reverse.
    pub unique: Vec<bool>,
    /// The number of keys that first appear in this round.
    pub new: u64,
    /// The largest name given so far (pass it to the next round).
    pub last: u64,
}

/// Names one round of a sequence sorted in key ranges ([`super::sort_in_rounds`]) by rank, and
/// tells which keys are unique: a unique key's name is then its record's exact rank, and a
/// shared key's name is where its group of records starts. `last` is the previous round's
/// [`RankedRound::last`] (0 before the first). [`GroupNames`] counting from 1. Collective.
///
/// Entry: `round` as `sort_in_rounds` hands it to every pe. Exit: see [`RankedRound`]; a key
/// whose records straddle a pe or round boundary keeps one name. Communication: one prefix
/// maximum, one sum and one maximum.
pub fn rank_round<T, F>(comm: &Comm, round: &Round<T>, last: u64, same: F) -> RankedRound
where
    T: Pod + Send + Sync,
    F: Fn(&T, &T) -> bool + Sync,
{
    let mut named = GroupNames {
        from: 1,
        open: last,
    };
    let Groups { names, alone, .. } = named.round::<u64, T>(comm, round, same);
    // The round's last record may share its key with the next round's first one.
    let mut unique = alone;
    if round.open_end() {
        if let Some(u) = unique.last_mut() {
            *u = false;
        }
    }
    // A record starts its group where its name is its own rank.
    let first = round.offset + 1;
    let starts = (names.iter().enumerate())
        .filter(|&(j, &nm)| nm == first + j as u64)
        .count();
    RankedRound {
        names,
        unique,
        new: comm.all_reduce_sum(starts as u64),
        last: named.last(),
    }
}

/// One round's groups of equal records ([`GroupNames::round`]), names in an index width `I`.
pub struct Groups<I> {
    /// Per record: its group's name ([`GroupNames`]).
    pub names: Vec<I>,
    /// Per record: whether it is alone in its group. A record without a known successor (the
    /// round's last while later rounds follow, [`Round::open_end`]) counts as ending its group:
    /// whether the next non-empty round's first record continues it is for the caller to settle,
    /// from that round's [`Groups::first_starts`].
    pub alone: Vec<bool>,
    /// Whether this pe's first record begins a group (None without records).
    pub first_starts: Option<bool>,
}

/// Names the groups of equal records of a sequence sorted in key ranges
/// ([`super::sort_in_rounds`]), round by round: a group's name is `from` + the global rank
/// (0-based) of its first record, whichever pe or round holds it, so a group that straddles pes
/// or rounds keeps one name. Holds the name of the last group begun in the rounds named so far.
pub struct GroupNames {
    from: u64,
    /// The largest name given so far (0: none, or the group of rank 0 with `from` 0).
    open: u64,
}

/// Records per task in [`GroupNames::round`]'s parallel passes.
const CHUNK: usize = 1 << 16;

impl GroupNames {
    /// Before the first round, names counted from `from`.
    pub fn new(from: u64) -> Self {
        GroupNames { from, open: 0 }
    }

    /// The largest name given so far (0 before any).
    pub fn last(&self) -> u64 {
        self.open
    }

    /// Names one round's groups (`same(a, b)`: two neighbouring records are in one group).
    /// Collective: a prefix maximum and a maximum.
    ///
    /// Entry: `round` as `sort_in_rounds` hands it to every pe, the rounds in order. Exit: the
    /// names and flags of this pe's records of the round ([`Groups`]). Memory: a flag per record
    /// beside the names and flags returned, and a name per chunk of 2^16 records.
    pub fn round<I, T>(
        &mut self,
        comm: &Comm,
        round: &Round<T>,
        same: impl Fn(&T, &T) -> bool + Sync,
    ) -> Groups<I>
    where
        I: Index,
        T: Pod + Send + Sync,
    {
        let sorted = &round.sorted;
        let len = sorted.len();
        // starts[j]: does record j begin a group?
        let starts: Vec<bool> = collect_range(len, |j| {
            let before = if j == 0 {
                round.prev.as_ref()
            } else {
                Some(&sorted[j - 1])
            };
            before.is_none_or(|b| !same(b, &sorted[j]))
        });
        let first = round.offset + self.from;
        // A max-scan of group starts: the last start of each chunk, carried across chunks and pes.
        let chunk = if serial() { len.max(1) } else { CHUNK };
        let last = last_starts(&starts, chunk, first);
        let local_max = last.iter().flatten().copied().max().unwrap_or(0);
        let carries = carries(&last, comm.exscan_max(local_max).max(self.open));
        let names = names_of(&starts, &carries, chunk, first);
        // alone[j]: does record j begin a group that the next record does not continue?
        let alone = collect_range(len, |j| {
            let ends = match sorted.get(j + 1) {
                Some(_) => starts[j + 1],
                None => round.next.as_ref().is_none_or(|nx| !same(&sorted[j], nx)),
            };
            starts[j] && ends
        });
        self.open = comm.all_reduce_max(local_max).max(self.open);
        Groups {
            names,
            alone,
            first_starts: starts.first().copied(),
        }
    }
}

/// Whether [`GroupNames::round`] runs on the calling thread alone (one thread per pe: a single
/// chunk, no tasks).
fn serial() -> bool {
    rayon::current_num_threads() == 1
}

/// The name of the last group start in each chunk of `chunk` records whose group starts are
/// `starts` (None: none in it; a start at index j is named `first + j`). Local.
fn last_starts(starts: &[bool], chunk: usize, first: u64) -> Vec<Option<u64>> {
    (starts.chunks(chunk).enumerate())
        .map(|(c, ch)| {
            ch.iter()
                .rposition(|&s| s)
                .map(|j| first + (c * chunk + j) as u64)
        })
        .collect()
}

/// The name of the group open before each chunk: `carry` before the first, then the last start
/// of the chunks before it ([`last_starts`]). Local.
fn carries(last: &[Option<u64>], mut carry: u64) -> Vec<u64> {
    (last.iter())
        .map(|&l| {
            let c = carry;
            carry = l.unwrap_or(c);
            c
        })
        .collect()
}

/// The names of records whose group starts are `starts`, in chunks of `chunk` records: chunk c
/// continues the group named `carries[c]`, and a record that starts a group at index j is named
/// `first + j`. Local.
fn names_of<I: Index>(starts: &[bool], carries: &[u64], chunk: usize, first: u64) -> Vec<I> {
    let fill = |c: usize, nm: &mut [I], st: &[bool], mut cur: u64| {
        for (j, (slot, &s)) in nm.iter_mut().zip(st).enumerate() {
            if s {
                cur = first + (c * chunk + j) as u64;
            }
            *slot = I::from_u64(cur);
        }
    };
    let mut names = vec![I::zeroed(); starts.len()];
    if serial() {
        for (c, (nm, st)) in names
            .chunks_mut(chunk)
            .zip(starts.chunks(chunk))
            .enumerate()
        {
            fill(c, nm, st, carries[c]);
        }
    } else {
        (names.par_chunks_mut(chunk).zip(starts.par_chunks(chunk)))
            .enumerate()
            .for_each(|(c, (nm, st))| fill(c, nm, st, carries[c]));
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chunked naming (a group's name carried across chunks) gives what one pass does, for
    /// chunks of 1, 7 and [`CHUNK`] records, sparse and dense starts, on 1 and 3 threads.
    #[test]
    fn chunked_names_match_one_pass() {
        let mut rng = crate::util::SplitMix::new(7);
        for threads in [1, 3] {
            crate::dist::test_pool(threads).install(|| {
                for len in [0usize, 1, 6, 7, 8, 100, CHUNK + 5, 3 * CHUNK] {
                    for every in [1u64, 2, 50, 1 << 40] {
                        // The first record starts a group unless a group is carried in.
                        let carried = len % 2 == 1;
                        let starts: Vec<bool> = (0..len)
                            .map(|j| (j == 0 && !carried) || rng.next().is_multiple_of(every))
                            .collect();
                        let (first, carry_in) = (1000u64, 17u64);
                        let mut want = Vec::with_capacity(len);
                        let mut cur = carry_in;
                        for (j, &s) in starts.iter().enumerate() {
                            if s {
                                cur = first + j as u64;
                            }
                            want.push(cur);
                        }
                        for chunk in [1usize, 7, CHUNK] {
                            let last = last_starts(&starts, chunk, first);
                            let got: Vec<u64> =
                                names_of(&starts, &carries(&last, carry_in), chunk, first);
                            assert_eq!(got, want, "{threads} threads, {len}, 1/{every}, {chunk}");
                        }
                    }
                }
            });
        }
    }
}
